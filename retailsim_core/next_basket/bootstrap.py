"""95% intervals by a customer-cluster bootstrap, vectorised over resamples.

Baskets of one customer are correlated, so customers (not baskets) are resampled with
replacement: resample b gives customer c a weight w[b, c] (multinomial counts) and a metric's
resampled mean is sum_c w[b, c] * sum_of_c / sum_c w[b, c] * count_of_c. The same weights serve
every method, so a paired difference between two methods gets its own interval.

Glossary: S baskets, C customers, N resamples.
"""

from __future__ import annotations

import numpy as np


def resample_weights(customers: np.ndarray, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(N, C) multinomial customer weights and (S,) each basket's customer index."""
    _, index = np.unique(customers, return_inverse=True)
    n_customers = int(index.max()) + 1 if len(index) else 0
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(n_customers, np.full(n_customers, 1.0 / max(n_customers, 1)), size=n)
    return weights.astype(np.float64), index


def interval(
    values: np.ndarray, weights: np.ndarray, index: np.ndarray, level: float = 0.95
) -> tuple[float, float]:
    """The (lower, upper) percentile interval of the mean of ``values`` (S,), NaNs left out."""
    ok = ~np.isnan(values)
    if not ok.any():
        return float("nan"), float("nan")
    sums = np.bincount(index[ok], weights=values[ok], minlength=weights.shape[1])
    counts = np.bincount(index[ok], minlength=weights.shape[1]).astype(np.float64)
    means = (weights @ sums) / np.maximum(weights @ counts, 1e-12)  # (N,)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return float(lo), float(hi)
