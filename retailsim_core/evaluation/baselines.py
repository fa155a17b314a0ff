"""Frequency baselines and TIFU-KNN (Hu et al., KDD 2020), as sparse matrix products.

Every baseline sees, for a sample of week W, only the customer's trips before W (the trip store
slice ``[hist_start, hist_end)``) and global counts of weeks before the evaluation period.

Glossary: S samples, T trips, V vocabulary, C customers of the neighbour pool.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from retailsim_core.tensors import TrainingSet
from retailsim_core.tokens import PAD


def trip_matrix(data: TrainingSet) -> sp.csr_matrix:
    """(T, V) 0/1 matrix of every trip's products."""
    counts = np.diff(data.trip_offsets)
    rows = np.repeat(np.arange(len(counts)), counts)
    m = sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, data.trip_tokens)),
                      shape=(len(counts), data.vocab.size))
    m.sum_duplicates()
    m.data[:] = 1.0
    return m


def history_weights(start: np.ndarray, end: np.ndarray, n_trips: int, weight_of_position=None) -> sp.csr_matrix:
    """(S, T) weights of the trips ``[start, end)`` of each row; ``weight_of_position(k, n)`` gives
    the weight of the k-th most recent trip (k = 0 newest) of a history of n trips (default 1)."""
    n = end - start
    r = np.repeat(np.arange(len(start)), n)
    offset = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
    trips = np.repeat(start, n) + offset
    k = np.repeat(n, n) - 1 - offset                                                # 0 = most recent
    w = np.ones(len(r), dtype=np.float64) if weight_of_position is None else weight_of_position(k, np.repeat(n, n))
    return sp.csr_matrix((w, (r, trips)), shape=(len(start), n_trips))


def sample_history(data: TrainingSet, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Full trip-store history bounds of samples (not capped at the tensors' max_history_trips)."""
    return data.full_hist_start[rows], data.hist_end[rows], len(data.trip_day)


def personal_counts(data: TrainingSet, rows: np.ndarray, trips: sp.csr_matrix) -> sp.csr_matrix:
    """(S, V) number of history trips containing each product."""
    return history_weights(*sample_history(data, rows)) @ trips


def _finish(scores: np.ndarray, vocab_size: int) -> torch.Tensor:
    """Deterministic tie-break by token order; specials never recommended."""
    out = torch.as_tensor(np.asarray(scores, dtype=np.float64) - 1e-9 * np.arange(vocab_size) / vocab_size)
    out[:, PAD] = -torch.inf
    out[:, vocab_size - 2:] = -torch.inf                                            # [MASK], [EOS]
    return out


def g_topfreq(popularity: np.ndarray, n: int) -> torch.Tensor:
    return _finish(np.broadcast_to(popularity, (n, len(popularity))), len(popularity))


def p_topfreq(counts: sp.csr_matrix) -> torch.Tensor:
    return _finish(counts.toarray(), counts.shape[1])


def gp_topfreq(counts: sp.csr_matrix, popularity: np.ndarray) -> torch.Tensor:
    """Personal frequency first, the global popularity (scaled below 1) fills the rest."""
    pop = popularity / max(popularity.max(), 1.0)
    return _finish(counts.toarray() + 0.5 * np.clip(pop, 0, None), counts.shape[1])


@dataclass(frozen=True)
class TifuConfig:
    group_size: int = 7          # m: baskets per group
    within_decay: float = 0.9    # r_b
    group_decay: float = 0.7     # r_g
    k_neighbours: int = 300
    alpha: float = 0.7           # weight of the customer's own vector

    def grid(self) -> list[TifuConfig]:
        """The validation grid over the paper's five parameters (alpha = 1: personal decayed frequency)."""
        return [TifuConfig(m, rb, rg, k, a) for m in (3, 7) for rb in (0.9, 1.0) for rg in (0.6, 0.9)
                for k in (100, 300) for a in (0.7, 0.9, 1.0)]


def tifu_weights(cfg: TifuConfig):
    """TIFU-KNN's time-decayed weights of trip k (0 = newest) among n: baskets are grouped from the
    oldest in groups of m; within a group r_b^(m - i), across groups r_g^(G - j), each group and the
    whole vector averaged (the paper's Eq. 2-3)."""
    def weight(k, n):
        pos = n - 1 - k                                                              # 0 = oldest
        groups = np.ceil(n / cfg.group_size)
        g, i = pos // cfg.group_size, pos % cfg.group_size
        size_g = np.minimum(cfg.group_size, n - g * cfg.group_size)
        return (cfg.within_decay ** (size_g - 1 - i) / size_g) * (cfg.group_decay ** (groups - 1 - g) / groups)
    return weight


def tifu_vectors(data: TrainingSet, rows: np.ndarray, trips: sp.csr_matrix, cfg: TifuConfig) -> sp.csr_matrix:
    return history_weights(*sample_history(data, rows), tifu_weights(cfg)) @ trips


def pool_bounds(data: TrainingSet, before_day: int) -> tuple[np.ndarray, np.ndarray]:
    """Every customer's trips strictly before ``before_day``: the TIFU-KNN neighbour pool."""
    first = np.flatnonzero(np.r_[True, data.trip_customer[1:] != data.trip_customer[:-1]])
    # Trips are sorted by customer and time: the trips before the day are a prefix of each run.
    ends = first + np.add.reduceat((data.trip_day < before_day).astype(np.int64), first)
    keep = ends > first
    return first[keep], ends[keep]


def tifu_knn(own: sp.csr_matrix, pool: sp.csr_matrix, cfg: TifuConfig, own_customer: np.ndarray | None = None,
             pool_customer: np.ndarray | None = None, chunk: int = 1024) -> torch.Tensor:
    """alpha * own vector + (1 - alpha) * mean of the k most cosine-similar pool vectors (never the
    customer itself); the neighbour mean is a sparse (s, C) x (C, V) product, not a gather."""
    def unit(m):
        norms = np.sqrt(np.asarray(m.multiply(m).sum(1)).ravel())
        return (sp.diags(1.0 / np.maximum(norms, 1e-12)) @ m).tocsr()
    pool_unit, own_unit = unit(pool), unit(own)
    pool = pool.tocsr()
    out = []
    for i in range(0, own.shape[0], chunk):
        sims = torch.as_tensor((own_unit[i:i + chunk] @ pool_unit.T).toarray(), dtype=torch.float32)   # (s, C)
        if own_customer is not None and pool_customer is not None:
            self_hit = own_customer[i:i + chunk, None] == pool_customer[None, :]
            sims = sims.masked_fill(torch.from_numpy(self_hit), -torch.inf)
        k = min(cfg.k_neighbours, sims.shape[1])
        idx = sims.topk(k, dim=1).indices.numpy()                                   # (s, k)
        rows = np.repeat(np.arange(len(idx)), k)
        pick = sp.csr_matrix((np.full(rows.size, 1.0 / k), (rows, idx.ravel())), shape=(len(idx), pool.shape[0]))
        neighbours = (pick @ pool).toarray()                                         # (s, V)
        out.append(cfg.alpha * own[i:i + chunk].toarray() + (1 - cfg.alpha) * neighbours)
    return _finish(np.concatenate(out), own.shape[1])


def tifu_pool(data: TrainingSet, trips: sp.csr_matrix, before_day: int):
    """(config -> (C, V) TIFU vectors of every customer as of ``before_day``, (C,) customer codes)."""
    first, end = pool_bounds(data, before_day)
    return (lambda cfg: history_weights(first, end, len(data.trip_day), tifu_weights(cfg)) @ trips,
            data.trip_customer[first])


def sample_customers(data: TrainingSet, rows: np.ndarray) -> np.ndarray:
    """Customer code of each sample (-1 without history: it cannot be in the pool either)."""
    start, end = data.full_hist_start[rows], data.hist_end[rows]
    return np.where(end > start, data.trip_customer[np.minimum(start, len(data.trip_customer) - 1)], -1)
