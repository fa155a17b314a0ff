"""Counting baselines (G/P/GP-TopFreq, store- and mission-aware P-TopFreq) and the co-purchase
baseline of the masked-item task, as sparse matrix products; the history weights and score
finishing that the neighbourhood baselines (``neighbour_baselines.py``) share.

Every baseline sees, for a sample of week W, only the customer's trips before W (the trip store
slice ``[full_hist_start, hist_end)``), global counts of weeks before the evaluation period and,
where its name says so, the trip's store (store-aware P-TopFreq) or the basket's mission
(mission P-TopFreq, the fair baseline of the model's conditional row). ``METHOD_INPUTS`` in
``next_basket/methods.py`` lists what each method sees (``METHOD_INPUTS``).

Glossary: S samples, T trips, V vocabulary, C customers of the neighbour pool.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from retailsim_core.datasets.tensors import TrainingSet
from retailsim_core.datasets.tokens import PAD, mask_token


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


def finish_scores(scores: np.ndarray, vocab_size: int) -> torch.Tensor:
    """Deterministic tie-break by token order; specials never recommended."""
    out = torch.as_tensor(
        np.asarray(scores, dtype=np.float64) - 1e-9 * np.arange(vocab_size) / vocab_size
    )
    out[:, PAD] = -torch.inf
    out[:, mask_token(vocab_size) :] = -torch.inf  # [MASK], [EOS]
    return out


def g_topfreq(popularity: np.ndarray, n: int) -> torch.Tensor:
    return finish_scores(np.broadcast_to(popularity, (n, len(popularity))), len(popularity))


def p_topfreq(counts: sp.csr_matrix) -> torch.Tensor:
    return finish_scores(counts.toarray(), counts.shape[1])


def gp_topfreq(counts: sp.csr_matrix, popularity: np.ndarray) -> torch.Tensor:
    """Personal frequency first, the global popularity (scaled below 1) fills the rest."""
    pop = popularity / max(popularity.max(), 1.0)
    return finish_scores(counts.toarray() + 0.5 * np.clip(pop, 0, None), counts.shape[1])


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
    mission = data.basket_labels[rows, :2]
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
    return finish_scores(total, counts[0].shape[1])


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
    return finish_scores(freq + weight * co, personal.shape[1])
