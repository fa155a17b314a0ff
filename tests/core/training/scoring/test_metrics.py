"""The metrics' reductions give the same bits for the same values, and the metrics read at the
baskets' products equal the dense masks'."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from retailsim_core.training.scoring.metrics import pearson, summarise


def test_the_revenue_correlation_is_the_same_whatever_the_alignment():
    """Exactly rounded sums: the same bits for the same values wherever they lie in memory
    (NumPy's SIMD dot products differ in the last bit with the alignment)."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=999), rng.normal(size=999)
    for offset in range(1, 4):
        shifted = np.empty(999 + offset)[offset:]
        shifted[:] = a
        assert pearson(shifted, b) == pearson(a, b)
    assert pearson(a, b) == pytest.approx(np.corrcoef(a, b)[0, 1], rel=1e-12)


def test_a_constant_side_has_no_revenue_correlation():
    """A popularity ranking predicts the same revenue for every basket: no correlation, not a
    division by zero (NumPy's std of such a constant can be a rounding above zero)."""
    constant = np.full(7, 2.3)
    assert constant.std() > 0  # the rounding the old guard trusted
    spend = np.arange(7.0)
    assert pearson(constant, spend) is None and pearson(spend, constant) is None
    got = summarise({"R@20": np.ones(7), "predicted_revenue": constant, "spend": spend})
    assert got == {"R@20": 1.0}
    both = summarise({"predicted_revenue": spend * 2, "spend": spend})
    assert both["revenue_correlation"] == pytest.approx(1.0)


def _dense_metrics(scores, truth, *, repeat, basket_len, categories, prices, spend, outside):
    """The oracle: every set of the metrics as a dense (S, V) mask."""
    from retailsim_core.training.scoring.metrics import KS, ndcg_at, recall_at

    s = scores.shape[0]
    top = torch.topk(scores, max(KS), dim=1).indices.numpy()
    dense = truth.toarray().astype(bool)
    hits = dense[np.arange(s)[:, None], top]
    n_true = dense.sum(1) + outside
    out = {}
    for k in KS:
        out[f"P@{k}"] = hits[:, :k].sum(1) / k
        out[f"R@{k}"] = recall_at(hits, n_true, k)
        if k in (10, 20):
            out[f"NDCG@{k}"] = ndcg_at(hits, n_true, k)
    best_true = np.where(dense, scores.numpy(), -np.inf).max(1)
    out["MRR"] = 1.0 / (1 + (scores.numpy() > best_true[:, None]).sum(1))
    out["top3_hit"] = hits[:, :3].any(1).astype(float)
    n = np.clip(basket_len, 1, max(KS))
    in_pred = np.arange(max(KS))[None, :] < n[:, None]
    tp = (hits & in_pred).sum(1)
    precision, recall = tp / n, tp / np.maximum(n_true, 1)
    out["F1"] = np.where(tp > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-12), 0)
    onehot = sp.csr_matrix((np.ones(len(categories)), (np.arange(len(categories)), categories)))
    top10 = np.zeros_like(dense)
    top10[np.arange(s)[:, None], top[:, :10]] = True
    cats_true = (sp.csr_matrix(dense) @ onehot).toarray() > 0
    cats_top = (sp.csr_matrix(top10) @ onehot).toarray() > 0
    out["category_coverage"] = (cats_true & cats_top).sum(1) / np.maximum(cats_true.sum(1), 1)
    rep = repeat.toarray().astype(bool)
    top20 = np.zeros_like(dense)
    top20[np.arange(s)[:, None], top] = True
    for name, part in (("R@20_repeat", dense & rep), ("R@20_explore", dense & ~rep)):
        total = part.sum(1)
        out[name] = np.where(total > 0, (part & top20).sum(1) / np.maximum(total, 1), np.nan)
    out["predicted_revenue"] = (prices[np.arange(s)[:, None], top] * in_pred).sum(1)
    out["spend"] = spend
    return out


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    samples=st.integers(1, 7),
    vocab=st.integers(20, 60),
    dtype=st.sampled_from(["float32", "float64"]),
)
def test_next_basket_metrics_equal_the_dense_oracle(seed, samples, vocab, dtype):
    """Ties (scores on a coarse grid), -inf scores, empty baskets, duplicate truth entries,
    repeat counts with explicit zeros: the metrics read at the baskets' products and the top 20
    equal the dense masks' to the bit."""
    from retailsim_core.training.scoring.metrics import next_basket_metrics

    rng = np.random.default_rng(seed)
    scores = torch.from_numpy(rng.integers(-4, 5, size=(samples, vocab)).astype(dtype))
    scores[torch.from_numpy(rng.random(scores.shape) < 0.1)] = -torch.inf
    n = rng.integers(0, 8, size=samples)
    rows = np.repeat(np.arange(samples), n)
    truth = sp.csr_matrix(
        (np.ones(len(rows)), (rows, rng.integers(0, vocab, len(rows)))), shape=(samples, vocab)
    )  # duplicates summed, as truth_matrix's
    truth.data[:] = 1.0
    repeat = sp.random(samples, vocab, density=0.3, random_state=seed, format="csr")
    repeat.data[rng.random(len(repeat.data)) < 0.2] = 0.0  # explicit zeros: not bought
    kwargs = dict(
        repeat=repeat,
        basket_len=rng.integers(0, 30, size=samples),
        categories=rng.integers(0, 6, size=vocab),
        prices=rng.random((samples, vocab)),
        spend=rng.random(samples),
        outside=rng.integers(0, 3, size=samples),
    )
    got = next_basket_metrics(scores, truth, **kwargs)
    want = _dense_metrics(scores, truth, **kwargs)
    assert got.keys() == want.keys()
    for key, value in want.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)
