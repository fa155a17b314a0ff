"""Next-basket and masked-item metrics (design §4.7.4), vectorised over chunks of samples.

Glossary: S samples in a chunk, V vocabulary, T truth products of a sample.
Every method hands in a score matrix (S, V); ties are broken by token order so that rankings
are deterministic. [PAD], [MASK] and [EOS] are never recommended.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
import torch

KS = (5, 10, 20)


def truth_matrix(
    item_tokens: np.ndarray, starts: np.ndarray, counts: np.ndarray, vocab_size: int
) -> sp.csr_matrix:
    """(S, V) 0/1 matrix of each sample's basket products."""
    rows = np.repeat(np.arange(len(starts)), counts)
    idx = np.repeat(starts, counts) + (
        np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    )
    m = sp.csr_matrix(
        (np.ones(len(rows), dtype=np.float32), (rows, item_tokens[idx])),
        shape=(len(starts), vocab_size),
    )
    m.data[:] = 1.0
    return m


def recall_at(hits: np.ndarray, n_true: np.ndarray, k: int) -> np.ndarray:
    """(S,) recall of the first ``k`` of each ranked list; ``hits`` (S, >= k) marks the basket's
    products, ``n_true`` (S,) counts them (those no method can rank included)."""
    return hits[:, :k].sum(1) / np.maximum(n_true, 1)


def ndcg_at(hits: np.ndarray, n_true: np.ndarray, k: int) -> np.ndarray:
    """(S,) binary-relevance NDCG of the first ``k`` of each ranked list (as ``recall_at``; a
    list shorter than ``k`` counts as padded with misses)."""
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    ideal = np.cumsum(discounts)[np.minimum(n_true, k) - 1]
    shown = min(k, hits.shape[1])
    return (hits[:, :shown] * discounts[:shown]).sum(1) / ideal


def _entries(m: sp.spmatrix) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of the stored non-zero cells of ``m``, duplicates merged."""
    m = sp.csr_matrix(m, copy=True)
    m.sum_duplicates()
    rows, cols = m.nonzero()
    return rows.astype(np.int64), cols.astype(np.int64)  # keys row * V + column overflow int32


def ranked_hits(
    scores: torch.Tensor, truth: sp.csr_matrix, outside: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(S, 20) top tokens, (S, 20) hits of the top and (S,) basket sizes (``outside``, the
    products no method can rank, included): what every ranking metric reads. Read at the
    basket's products only: a dense (S, V) truth was most of a chunk's metrics at 61,445
    products."""
    rows, cols = _entries(truth)
    return _ranked(scores, rows, rows * scores.shape[1] + cols, outside)[:3]


def _ranked(scores, rows, keys, outside) -> tuple[np.ndarray, ...]:
    """``ranked_hits`` from the truth's entries (their rows and keys row * V + token), and the
    (S, 20) keys of the top, which the set metrics reuse."""
    s, v = scores.shape
    top = torch.topk(scores.detach(), max(KS), dim=1).indices.numpy()  # (S, 20)
    top_keys = np.arange(s)[:, None] * v + top  # (S, 20)
    hits = np.isin(top_keys, keys)  # (S, 20)
    n_true = np.bincount(rows, minlength=s) + (0 if outside is None else outside)
    return top, hits, n_true, top_keys


def next_basket_metrics(
    scores: torch.Tensor,
    truth: sp.csr_matrix,
    *,
    repeat: sp.csr_matrix,
    basket_len: np.ndarray,
    categories: np.ndarray,
    prices: np.ndarray | None = None,
    spend: np.ndarray | None = None,
    outside: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Per-sample metrics of one chunk. ``repeat`` (S, V): products the customer bought before;
    ``basket_len`` (S,): size of the predicted basket for F1 (from the customer's history, never
    the truth); ``categories`` (V,): category code of each token; ``prices`` (S, V) week prices;
    ``outside`` (S,): products of the basket outside the vocabulary (first sold in a test week):
    no method can rank them, and recall counts them as missed. Every set operation reads the
    basket's products and the top 20, never a dense (S, V) mask (the oracle test keeps one)."""
    scores = scores.detach()
    s, v = scores.shape
    rows, cols = _entries(truth)  # (N,) the baskets' products
    keys = rows * v + cols
    top, hits, n_true, top_keys = _ranked(scores, rows, keys, outside)
    out: dict[str, np.ndarray] = {}
    for k in KS:
        out[f"P@{k}"] = hits[:, :k].sum(1) / k
        out[f"R@{k}"] = recall_at(hits, n_true, k)
        if k in (10, 20):
            out[f"NDCG@{k}"] = ndcg_at(hits, n_true, k)
    # MRR: reciprocal rank of the best-ranked true product over the full ranking. The best
    # true score is one of the scores, so it compares exactly in the scores' own dtype.
    values = scores.numpy()
    best_true = np.full(s, -np.inf)
    np.maximum.at(best_true, rows, values[rows, cols].astype(np.float64))
    above = np.count_nonzero(values > best_true.astype(values.dtype)[:, None], axis=1)
    out["MRR"] = 1.0 / (1 + above)
    out["top3_hit"] = hits[:, :3].any(1).astype(float)
    # Basket F1 with a predicted basket of the customer's usual size.
    n = np.clip(basket_len, 1, max(KS))
    in_pred = np.arange(max(KS))[None, :] < n[:, None]
    tp = (hits & in_pred).sum(1)
    precision, recall = tp / n, tp / np.maximum(n_true, 1)
    out["F1"] = np.where(
        tp > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-12), 0.0
    )
    # Category coverage: share of the basket's categories that the top 10 touches.
    n_cat = int(categories.max()) + 1
    cats_true = np.unique(rows * n_cat + categories[cols])
    cats_top = np.arange(s)[:, None] * n_cat + categories[top[:, :10]]
    touched = np.isin(cats_true, cats_top)
    per_basket = np.bincount(cats_true // n_cat, minlength=s)
    out["category_coverage"] = np.bincount(cats_true[touched] // n_cat, minlength=s) / np.maximum(
        per_basket, 1
    )
    # Recall of the top 20 on the products bought before (repeat) and the others (explore).
    rep_rows, rep_cols = _entries(repeat)
    bought = np.isin(keys, rep_rows * v + rep_cols)
    in_top = np.isin(keys, top_keys)
    for name, part in (("R@20_repeat", bought), ("R@20_explore", ~bought)):
        total = np.bincount(rows[part], minlength=s)
        found = np.bincount(rows[part & in_top], minlength=s)
        out[name] = np.where(total > 0, found / np.maximum(total, 1), np.nan)
    if prices is not None and spend is not None:
        out["predicted_revenue"] = (prices[np.arange(s)[:, None], top] * in_pred).sum(1)
        out["spend"] = spend
    return out


def summarise(
    per_sample: dict[str, np.ndarray], rows: np.ndarray | None = None
) -> dict[str, float]:
    """Mean of each metric over ``rows`` (NaN = not applicable are skipped); revenue correlation
    is the Pearson correlation of predicted revenue and actual spend over those samples."""
    pick = (lambda v: v) if rows is None else (lambda v: v[rows])
    out = {
        k: float(np.nanmean(pick(v)))
        for k, v in per_sample.items()
        if k not in ("predicted_revenue", "spend") and len(pick(v)) and not np.isnan(pick(v)).all()
    }
    if "predicted_revenue" in per_sample:
        a, b = pick(per_sample["predicted_revenue"]), pick(per_sample["spend"])
        r = pearson(a, b) if len(a) > 2 else None
        if r is not None:
            out["revenue_correlation"] = r
    return out


def pearson(a: np.ndarray, b: np.ndarray) -> float | None:
    """Pearson correlation from exactly rounded sums (``math.fsum``): the same figure whatever
    the arrays' memory alignment, which changes the last bit of NumPy's SIMD dot products (a
    report must give the same bytes run after run). None when either side is constant, told
    exactly (NumPy's std of a constant can come out a rounding above zero, and a constant's
    deviations from its rounded mean are zero or roundings)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.min() == a.max() or b.min() == b.max():
        return None
    da, db = a - math.fsum(a) / len(a), b - math.fsum(b) / len(b)
    return math.fsum(da * db) / math.sqrt(math.fsum(da * da) * math.fsum(db * db))


def masked_item_summary(ranks: np.ndarray, rows: np.ndarray | None = None) -> dict[str, float]:
    r = ranks.astype(np.float64) if rows is None else ranks[rows].astype(np.float64)
    if len(r) == 0:
        return {}
    hit = r <= 10
    return {
        "Hit@10": float(hit.mean()),
        "NDCG@10": float((hit / np.log2(r + 1)).mean()),
        "MRR": float((1 / r).mean()),
    }
