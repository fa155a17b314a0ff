"""Log-linear Poisson slopes per group, shrunk by empirical Bayes (decision D94).

Units y_i of a promoted cell against the units e_i its product × store sells unpromoted, at a
cut whose log price change is x_i = -log(1 - depth_i):

    y_i ~ Poisson(e_i * exp(b_g * x_i)),    b_g ~ Normal(prior_g, tau^2)

so b_g is group g's log-log response to its own price (an elasticity's magnitude). Each group's
posterior mode maximises sum_i (y_i b x_i - e_i exp(b x_i)) - (b - prior)^2 / (2 tau^2): a
Poisson regression through the origin with a ridge toward the prior, solved by Newton steps for
every group at once (``np.bincount``; cost grows with the promoted cells, not the groups).
tau^2 is estimated from the data (method of moments over the groups whose maximum-likelihood
slope is well measured): the spread of those slopes around their priors less their sampling
variance 1 / information. Deep cuts weigh more than shallow ones, as the likelihood says,
where a rate ratio divided by the mean depth weighs them alike.

Glossary: N promoted cells, G groups.
"""

from __future__ import annotations

import numpy as np

MIN_INFORMATION = 5.0  # Fisher information of a slope counted in tau^2 (its variance <= 0.2)
DEFAULT_VARIANCE = 1.0  # tau^2 when fewer than 3 groups are well measured
MIN_VARIANCE = 1e-3  # tau^2 floor: no spread means "all at the prior", not a division by 0
_STEP = 1.0  # Newton steps clipped: an unpenalised slope of a group that never sold runs off
_SPAN = 10.0  # unpenalised slopes kept within the prior +- this


def poisson_slopes(
    y: np.ndarray,
    e: np.ndarray,
    x: np.ndarray,
    group: np.ndarray,
    prior: np.ndarray,
    precision: float,
    iterations: int = 60,
) -> tuple[np.ndarray, np.ndarray]:
    """(G,) posterior-mode slopes and (G,) their Fisher information (likelihood part) from N
    cells (``y``, ``e``, ``x``, ``group`` in 0..G-1) and (G,) ``prior`` means; ``precision`` =
    1 / tau^2 (0: maximum likelihood). A group without cells keeps its prior."""
    n = len(prior)
    b = prior.astype(np.float64).copy()
    for _ in range(iterations):
        mu = e * np.exp(b[group] * x)  # (N,)
        grad = np.bincount(group, x * (y - mu), n) - precision * (b - prior)
        hess = np.bincount(group, x * x * mu, n) + precision
        step = np.clip(grad / np.maximum(hess, 1e-12), -_STEP, _STEP)
        b = np.clip(b + step, prior - _SPAN, prior + _SPAN)
        if np.abs(step).max(initial=0.0) < 1e-10:
            break
    information = np.bincount(group, x * x * e * np.exp(b[group] * x), n)
    return b, information


def moment_variance(slopes: np.ndarray, information: np.ndarray, prior: np.ndarray) -> float:
    """tau^2: mean of (slope - prior)^2 - 1 / information over the groups whose information is
    at least ``MIN_INFORMATION``; ``DEFAULT_VARIANCE`` if fewer than 3 are."""
    ok = information >= MIN_INFORMATION
    if ok.sum() < 3:
        return DEFAULT_VARIANCE
    spread = (slopes[ok] - prior[ok]) ** 2 - 1.0 / information[ok]
    return float(max(spread.mean(), MIN_VARIANCE))


def shrunk_slopes(
    y: np.ndarray,
    e: np.ndarray,
    x: np.ndarray,
    group: np.ndarray,
    prior: np.ndarray,
) -> tuple[np.ndarray, float]:
    """(G,) slopes shrunk toward ``prior`` (G,) by the estimated tau^2, and that tau^2."""
    mle, information = poisson_slopes(y, e, x, group, prior, 0.0)
    variance = moment_variance(mle, information, prior)
    return poisson_slopes(y, e, x, group, prior, 1.0 / variance)[0], variance


def hierarchical_slopes(
    y: np.ndarray,
    e: np.ndarray,
    x: np.ndarray,
    product: np.ndarray,
    category_of: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Products' slopes (P,) shrunk toward their categories' (K,), the categories' toward the
    overall one; ``product`` (N,) in 0..P-1, ``category_of`` (P,) in 0..K-1. Returns the
    products', the categories' and the overall slope; a group without cells takes its parent's."""
    overall = float(poisson_slopes(y, e, x, np.zeros(len(y), np.int64), np.zeros(1), 0.0)[0][0])
    n_categories = int(category_of.max()) + 1 if len(category_of) else 0
    category, _ = shrunk_slopes(y, e, x, category_of[product], np.full(n_categories, overall))
    own, _ = shrunk_slopes(y, e, x, product, category[category_of])
    return own, category, overall
