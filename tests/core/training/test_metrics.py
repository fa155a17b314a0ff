"""The metrics' reductions give the same bits for the same values."""

import numpy as np
import pytest

from retailsim_core.training.metrics import pearson


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
