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


def ranked_hits(
    scores: torch.Tensor, truth: sp.csr_matrix, outside: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(S, 20) top tokens, (S, V) truth as booleans, (S, 20) hits of the top and (S,) basket
    sizes (``outside``, the products no method can rank, included): what every ranking metric
    reads."""
    s = scores.shape[0]
    top = torch.topk(scores.detach(), max(KS), dim=1).indices.numpy()  # (S, 20)
    dense = truth.toarray().astype(bool)  # (S, V)
    hits = dense[np.arange(s)[:, None], top]  # (S, 20)
    n_true = dense.sum(1) + (0 if outside is None else outside)
    return top, dense, hits, n_true


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
    no method can rank them, and recall counts them as missed."""
    scores = scores.detach()
    s = scores.shape[0]
    top, dense, hits, n_true = ranked_hits(scores, truth, outside)
    out: dict[str, np.ndarray] = {}
    for k in KS:
        out[f"P@{k}"] = hits[:, :k].sum(1) / k
        out[f"R@{k}"] = recall_at(hits, n_true, k)
        if k in (10, 20):
            out[f"NDCG@{k}"] = ndcg_at(hits, n_true, k)
    # MRR: reciprocal rank of the best-ranked true product over the full ranking.
    best_true = np.where(dense, scores.numpy(), -np.inf).max(1)
    out["MRR"] = 1.0 / (1 + (scores.numpy() > best_true[:, None]).sum(1))
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
    onehot = sp.csr_matrix(
        (np.ones(len(categories)), (np.arange(len(categories)), categories))
    )  # (V, n_cat)
    top10 = np.zeros_like(dense)
    top10[np.arange(s)[:, None], top[:, :10]] = True
    cats_true = (sp.csr_matrix(dense) @ onehot).toarray() > 0
    cats_top = (sp.csr_matrix(top10) @ onehot).toarray() > 0
    out["category_coverage"] = (cats_true & cats_top).sum(1) / np.maximum(cats_true.sum(1), 1)
    rep = repeat.toarray().astype(bool)
    r_true, e_true = dense & rep, dense & ~rep
    top20 = np.zeros_like(dense)
    top20[np.arange(s)[:, None], top] = True
    out["R@20_repeat"] = np.where(
        r_true.sum(1) > 0, (r_true & top20).sum(1) / np.maximum(r_true.sum(1), 1), np.nan
    )
    out["R@20_explore"] = np.where(
        e_true.sum(1) > 0, (e_true & top20).sum(1) / np.maximum(e_true.sum(1), 1), np.nan
    )
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
