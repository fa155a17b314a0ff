"""Frequency baselines, TIFU-KNN (Hu et al., SIGIR 2020) and UP-CF@r (Faggioli et al., RecSys
2020), as sparse matrix products.

Every baseline sees, for a sample of week W, only the customer's trips before W (the trip store
slice ``[full_hist_start, hist_end)``), global counts of weeks before the evaluation period and,
where its name says so, the trip's store (store-aware P-TopFreq) or the basket's mission
(mission P-TopFreq, the fair baseline of the model's conditional row). ``METHOD_INPUTS`` in
``evaluation/scorers.py`` lists what each method sees (``METHOD_INPUTS``).

Glossary: S samples, T trips, V vocabulary, C customers of the neighbour pool.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from retailsim_core.tensors import TrainingSet
from retailsim_core.tokens import PAD, mask_token


def trip_matrix(data: TrainingSet) -> sp.csr_matrix:
    """(T, V) 0/1 matrix of every trip's products."""
    counts = np.diff(data.trip_offsets)
    rows = np.repeat(np.arange(len(counts)), counts)
    m = sp.csr_matrix(
        (np.ones(len(rows), dtype=np.float32), (rows, data.trip_tokens)),
        shape=(len(counts), data.vocab.size),
    )
    m.sum_duplicates()
    m.data[:] = 1.0
    return m


def history_weights(
    start: np.ndarray,
    end: np.ndarray,
    n_trips: int,
    weight_of_position=None,
    trip_weight: np.ndarray | None = None,
) -> sp.csr_matrix:
    """(S, T) weights of the trips ``[start, end)`` of each row; ``weight_of_position(k, n)`` gives
    the weight of the k-th most recent trip (k = 0 newest) of a history of n trips (default 1);
    ``trip_weight(rows, trips)`` multiplies it per (row, trip) entry."""
    n = end - start
    r = np.repeat(np.arange(len(start)), n)
    offset = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
    trips = np.repeat(start, n) + offset
    k = np.repeat(n, n) - 1 - offset  # 0 = most recent
    w = (
        np.ones(len(r), dtype=np.float64)
        if weight_of_position is None
        else weight_of_position(k, np.repeat(n, n))
    )
    if trip_weight is not None:
        w = w * trip_weight(r, trips)
    return sp.csr_matrix((w, (r, trips)), shape=(len(start), n_trips))


def sample_history(data: TrainingSet, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Full trip-store history bounds of samples (not capped at the tensors' max_history_trips)."""
    return data.full_hist_start[rows], data.hist_end[rows], len(data.trip_day)


def personal_counts(data: TrainingSet, rows: np.ndarray, trips: sp.csr_matrix) -> sp.csr_matrix:
    """(S, V) number of history trips containing each product."""
    return history_weights(*sample_history(data, rows)) @ trips


def _finish(scores: np.ndarray, vocab_size: int) -> torch.Tensor:
    """Deterministic tie-break by token order; specials never recommended."""
    out = torch.as_tensor(
        np.asarray(scores, dtype=np.float64) - 1e-9 * np.arange(vocab_size) / vocab_size
    )
    out[:, PAD] = -torch.inf
    out[:, mask_token(vocab_size) :] = -torch.inf  # [MASK], [EOS]
    return out


def g_topfreq(popularity: np.ndarray, n: int) -> torch.Tensor:
    return _finish(np.broadcast_to(popularity, (n, len(popularity))), len(popularity))


def p_topfreq(counts: sp.csr_matrix) -> torch.Tensor:
    return _finish(counts.toarray(), counts.shape[1])


def gp_topfreq(counts: sp.csr_matrix, popularity: np.ndarray) -> torch.Tensor:
    """Personal frequency first, the global popularity (scaled below 1) fills the rest."""
    pop = popularity / max(popularity.max(), 1.0)
    return _finish(counts.toarray() + 0.5 * np.clip(pop, 0, None), counts.shape[1])


def store_p_topfreq(
    data: TrainingSet, rows: np.ndarray, trips: sp.csr_matrix, popularity: np.ndarray
) -> torch.Tensor:
    """The customer's frequency at the trip's store first, then their frequency anywhere, then
    popularity: a counting baseline that knows the store, as the model does."""
    store = data.basket_context.store[rows]
    here = history_weights(
        *sample_history(data, rows), trip_weight=lambda r, t: data.trips.store[t] == store[r]
    )
    return _tiered([here @ trips, personal_counts(data, rows, trips)], popularity)


def mission_p_topfreq(
    data: TrainingSet, rows: np.ndarray, trips: sp.csr_matrix, popularity: np.ndarray
) -> torch.Tensor:
    """Frequency over the customer's past trips of the basket's own mission (type and focus),
    then over all their trips, then popularity. It sees the basket's mission labels: the fair
    baseline of the model's conditional (given-mission) row only."""
    mission = data.t6[rows, :2]
    same = history_weights(
        *sample_history(data, rows),
        trip_weight=lambda r, t: (data.trip_context[t] == mission[r]).all(1),
    )
    return _tiered([same @ trips, personal_counts(data, rows, trips)], popularity)


def _tiered(counts: list[sp.csr_matrix], popularity: np.ndarray) -> torch.Tensor:
    """Lexicographic ranking: the first (integer) count matrix, ties by the next, then by
    popularity. A lower tier is scaled into [0, 1), so it never overtakes one count above it."""
    total = np.broadcast_to(
        np.clip(popularity, 0, None) / max(popularity.max(), 1.0), counts[0].shape
    ).astype(np.float64)
    for c in reversed(counts):
        total = c.toarray() + total / (total.max() + 1.0)
    return _finish(total, counts[0].shape[1])


@dataclass(frozen=True)
class TifuConfig:
    group_size: int = 7  # m: baskets per group
    within_decay: float = 0.9  # r_b
    group_decay: float = 0.7  # r_g
    k_neighbours: int = 300
    alpha: float = 0.7  # weight of the customer's own vector

    def grid(self) -> list[TifuConfig]:
        """The validation grid over the paper's five parameters (alpha = 1: personal decayed
        frequency).
        """
        return [
            TifuConfig(m, rb, rg, k, a)
            for m in (3, 7)
            for rb in (0.9, 1.0)
            for rg in (0.6, 0.9)
            for k in (100, 300)
            for a in (0.7, 0.9, 1.0)
        ]


def tifu_weights(cfg: TifuConfig):
    """TIFU-KNN's time-decayed weights of trip k (0 = newest) among n: baskets are grouped from the
    oldest in groups of m; within a group r_b^(m - i), across groups r_g^(G - j), each group and the
    whole vector averaged (the paper's Eq. 2-3)."""

    def weight(k, n):
        pos = n - 1 - k  # 0 = oldest
        groups = np.ceil(n / cfg.group_size)
        g, i = pos // cfg.group_size, pos % cfg.group_size
        size_g = np.minimum(cfg.group_size, n - g * cfg.group_size)
        return (cfg.within_decay ** (size_g - 1 - i) / size_g) * (
            cfg.group_decay ** (groups - 1 - g) / groups
        )

    return weight


def tifu_vectors(
    data: TrainingSet, rows: np.ndarray, trips: sp.csr_matrix, cfg: TifuConfig
) -> sp.csr_matrix:
    return history_weights(*sample_history(data, rows), tifu_weights(cfg)) @ trips


def pool_bounds(data: TrainingSet, before_day: int) -> tuple[np.ndarray, np.ndarray]:
    """Every customer's trips strictly before ``before_day``: the TIFU-KNN neighbour pool."""
    first = np.flatnonzero(np.r_[True, data.trip_customer[1:] != data.trip_customer[:-1]])
    # Trips are sorted by customer and time: the trips before the day are a prefix of each run.
    ends = first + np.add.reduceat((data.trip_day < before_day).astype(np.int64), first)
    keep = ends > first
    return first[keep], ends[keep]


def tifu_knn(
    own: sp.csr_matrix,
    pool: sp.csr_matrix,
    cfg: TifuConfig,
    own_customer: np.ndarray | None = None,
    pool_customer: np.ndarray | None = None,
    chunk: int = 1024,
) -> torch.Tensor:
    """alpha * own vector + (1 - alpha) * mean of the k most cosine-similar pool vectors (never the
    customer itself); the neighbour mean is a sparse (s, C) x (C, V) product, not a gather."""

    def unit(m):
        norms = np.sqrt(np.asarray(m.multiply(m).sum(1)).ravel())
        return (sp.diags(1.0 / np.maximum(norms, 1e-12)) @ m).tocsr()

    pool_unit, own_unit = unit(pool), unit(own)
    pool = pool.tocsr()
    out = []
    for i in range(0, own.shape[0], chunk):
        sims = torch.as_tensor(
            (own_unit[i : i + chunk] @ pool_unit.T).toarray(), dtype=torch.float32
        )  # (s, C)
        if own_customer is not None and pool_customer is not None:
            self_hit = own_customer[i : i + chunk, None] == pool_customer[None, :]
            sims = sims.masked_fill(torch.from_numpy(self_hit), -torch.inf)
        k = min(cfg.k_neighbours, sims.shape[1])
        idx = sims.topk(k, dim=1).indices.numpy()  # (s, k)
        rows = np.repeat(np.arange(len(idx)), k)
        pick = sp.csr_matrix(
            (np.full(rows.size, 1.0 / k), (rows, idx.ravel())), shape=(len(idx), pool.shape[0])
        )
        neighbours = (pick @ pool).toarray()  # (s, V)
        out.append(cfg.alpha * own[i : i + chunk].toarray() + (1 - cfg.alpha) * neighbours)
    return _finish(np.concatenate(out), own.shape[1])


def tifu_pool(data: TrainingSet, trips: sp.csr_matrix, before_day: int):
    """(config -> (C, V) TIFU vectors of every customer as of ``before_day``, (C,) customer
    codes).
    """
    first, end = pool_bounds(data, before_day)
    return (
        lambda cfg: history_weights(first, end, len(data.trip_day), tifu_weights(cfg)) @ trips,
        data.trip_customer[first],
    )


def sample_customers(data: TrainingSet, rows: np.ndarray) -> np.ndarray:
    """Customer code of each sample (-1 without history: it cannot be in the pool either)."""
    start, end = data.full_hist_start[rows], data.hist_end[rows]
    return np.where(
        end > start, data.trip_customer[np.minimum(start, len(data.trip_customer) - 1)], -1
    )


@dataclass(frozen=True)
class UpcfConfig:
    """UP-CF@r (Faggioli et al., RecSys 2020): recency-aware user-wise popularity, spread by user
    similarity. p_r(u, i) is the share of u's last r baskets that hold i; sim(u, v) =
    |I_u & I_v| / (|I_u|^alpha |I_v|^(1 - alpha)) on the sets of products ever bought; the score
    is sum over u itself (similarity 1) and its k most similar customers of sim^q * p_r(v, i)."""

    recency: int = 5  # r: baskets of the window (0 = the whole history)
    alpha: float = 0.25  # asymmetry of the cosine
    locality: float = 5.0  # q: sharpens the similarities
    k_neighbours: int = 300

    def grid(self) -> list[UpcfConfig]:
        return [
            UpcfConfig(r, a, q, self.k_neighbours)
            for r in (1, 5, 25, 0)
            for a in (0.25, 0.75)
            for q in (1.0, 5.0)
        ]


def recent_popularity(
    start: np.ndarray, end: np.ndarray, n_trips: int, trips: sp.csr_matrix, recency: int
) -> sp.csr_matrix:
    """(S, V) share of each row's last ``recency`` trips (all when 0) that hold each product."""

    def weight(k, n):
        window = np.minimum(n, recency) if recency > 0 else n
        return (k < window) / np.maximum(window, 1)

    return history_weights(start, end, n_trips, weight) @ trips


def upcf(
    own_pop: sp.csr_matrix,
    own_sets: sp.csr_matrix,
    pool_pop: sp.csr_matrix,
    pool_sets: sp.csr_matrix,
    cfg: UpcfConfig,
    own_customer: np.ndarray,
    pool_customer: np.ndarray,
    popularity: np.ndarray,
    chunk: int = 1024,
) -> torch.Tensor:
    """UP-CF@r scores (S, V); customers never count as their own neighbours (they enter once, with
    similarity 1). Ties (cold-start rows) fall back to popularity."""
    own_sets, pool_sets = (
        (own_sets > 0).astype(np.float64).tocsr(),
        (pool_sets > 0).astype(np.float64).tocsr(),
    )
    own_size = np.asarray(own_sets.sum(1)).ravel()
    pool_size = np.asarray(pool_sets.sum(1)).ravel()
    pop = np.clip(popularity, 0, None) / max(popularity.max(), 1.0)
    out = []
    for i in range(0, own_sets.shape[0], chunk):
        inter = torch.as_tensor((own_sets[i : i + chunk] @ pool_sets.T).toarray())  # (s, C)
        denom = np.maximum(own_size[i : i + chunk, None], 1) ** cfg.alpha * np.maximum(
            pool_size[None, :], 1
        ) ** (1 - cfg.alpha)
        sims = inter / torch.as_tensor(denom)
        sims = sims.masked_fill(
            torch.from_numpy(own_customer[i : i + chunk, None] == pool_customer[None, :]), 0.0
        )
        k = min(cfg.k_neighbours, sims.shape[1])
        top = sims.topk(k, dim=1)
        rows = np.repeat(np.arange(len(sims)), k)
        weights = sp.csr_matrix(
            (top.values.numpy().ravel() ** cfg.locality, (rows, top.indices.numpy().ravel())),
            shape=(len(sims), pool_pop.shape[0]),
        )
        out.append(
            own_pop[i : i + chunk].toarray() + (weights @ pool_pop).toarray() + 1e-6 * pop[None, :]
        )
    return _finish(
        np.concatenate(out) if out else np.zeros((0, own_pop.shape[1])), own_pop.shape[1]
    )


def upcf_pool(data: TrainingSet, trips: sp.csr_matrix, before_day: int):
    """(config -> (C, V) recent popularity of every customer as of ``before_day``, (C, V) their
    product sets, (C,) customer codes)."""
    first, end = pool_bounds(data, before_day)
    sets = history_weights(first, end, len(data.trip_day)) @ trips
    return (
        lambda cfg: recent_popularity(first, end, len(data.trip_day), trips, cfg.recency),
        sets,
        data.trip_customer[first],
    )


def copurchase_matrix(trips: sp.csr_matrix) -> sp.csr_matrix:
    """(V, V) P(j in a trip | i in the trip) over the given trips, the diagonal left out."""
    t = (trips > 0).astype(np.float64).tocsr()
    co = (t.T @ t).tocsr()
    co.setdiag(0)
    co.eliminate_zeros()
    count = np.asarray(t.sum(0)).ravel()
    return (sp.diags(1.0 / np.maximum(count, 1.0)) @ co).tocsr()


def copurchase_scores(
    personal: sp.csr_matrix, shown: sp.csr_matrix, copurchase: sp.csr_matrix, weight: float
) -> torch.Tensor:
    """Masked-item baseline that sees the basket's shown products: the customer's normalised
    frequency plus ``weight`` x the mean co-purchase probability with each shown product.
    personal (M, V) counts of each masked slot's customer; shown (M, V) 0/1 shown products."""
    freq = personal.toarray()
    freq = freq / np.maximum(freq.max(1, keepdims=True), 1.0)
    n_shown = np.maximum(np.asarray(shown.sum(1)).ravel(), 1.0)
    co = (sp.diags(1.0 / n_shown) @ shown @ copurchase).toarray()
    return _finish(freq + weight * co, personal.shape[1])
