"""The metrics' reductions give the same bits for the same values."""

import numpy as np
import pytest

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
