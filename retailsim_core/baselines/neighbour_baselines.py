"""Neighbourhood baselines: TIFU-KNN (Hu et al., SIGIR 2020) and UP-CF@r (Faggioli et al.,
RecSys 2020), as sparse matrix products over a pool of every customer's trips before the
evaluation period.

Each sees, for a sample of week W, the customer's trips before W and the pool's trips before the
period's first day (``pool_bounds``); never the basket itself.

Glossary: S samples, T trips, V vocabulary, C customers of the neighbour pool.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from retailsim_core.baselines.counting import finish_scores, history_weights, sample_history
from retailsim_core.datasets.tensors import TrainingSet


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
    return next(tifu_knn_grid(own, pool, [cfg], own_customer, pool_customer, chunk))[1]


def tifu_knn_grid(
    own: sp.csr_matrix,
    pool: sp.csr_matrix,
    configs: list[TifuConfig],
    own_customer: np.ndarray | None = None,
    pool_customer: np.ndarray | None = None,
    chunk: int = 1024,
) -> Iterator[tuple[TifuConfig, torch.Tensor]]:
    """``tifu_knn`` of each config (in order), for configs that differ only in k and alpha (the
    vectors are the caller's): the similarities are computed once and each k's neighbour mean
    once, so a validation grid costs one similarity pass per set of vectors."""

    def unit(m):
        norms = np.sqrt(np.asarray(m.multiply(m).sum(1)).ravel())
        return (sp.diags(1.0 / np.maximum(norms, 1e-12)) @ m).tocsr()

    pool_unit, own_unit = unit(pool), unit(own)
    pool = pool.tocsr()
    ks = list(dict.fromkeys(min(c.k_neighbours, pool.shape[0]) for c in configs))
    neighbours: dict[int, list[np.ndarray]] = {k: [] for k in ks}
    for i in range(0, own.shape[0], chunk):
        sims = torch.as_tensor(
            (own_unit[i : i + chunk] @ pool_unit.T).toarray(), dtype=torch.float32
        )  # (s, C)
        if own_customer is not None and pool_customer is not None:
            self_hit = own_customer[i : i + chunk, None] == pool_customer[None, :]
            sims = sims.masked_fill(torch.from_numpy(self_hit), -torch.inf)
        for k in ks:
            idx = sims.topk(k, dim=1).indices.numpy()  # (s, k)
            rows = np.repeat(np.arange(len(idx)), k)
            pick = sp.csr_matrix(
                (np.full(rows.size, 1.0 / k), (rows, idx.ravel())), shape=(len(idx), pool.shape[0])
            )
            neighbours[k].append((pick @ pool).toarray())  # (s, V)
    mean = {k: np.concatenate(parts) for k, parts in neighbours.items()}  # (S, V) each
    dense = own.toarray()  # (S, V)
    for c in configs:
        near = mean[min(c.k_neighbours, pool.shape[0])]
        yield c, finish_scores(c.alpha * dense + (1 - c.alpha) * near, own.shape[1])


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
    return finish_scores(
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
