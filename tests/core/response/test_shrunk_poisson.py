"""Empirical-Bayes Poisson slopes: the maximum-likelihood slope in closed form, the posterior
mode against a scalar optimiser, the spread tau^2 recovered from planted slopes, shrinkage
between the prior and the data, and groups without cells at their parents'."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from retailsim_core.response.shrunk_poisson import (
    DEFAULT_VARIANCE,
    hierarchical_slopes,
    moment_variance,
    poisson_slopes,
    shrunk_slopes,
)


def test_one_group_at_one_cut_is_the_log_rate_ratio_per_log_price():
    y, e = np.array([4.0, 1.0, 3.0]), np.array([1.0, 1.0, 2.0])
    x = np.full(3, -math.log(0.75))
    b, info = poisson_slopes(y, e, x, np.zeros(3, np.int64), np.zeros(1), 0.0)
    assert b[0] == pytest.approx(math.log(8 / 4) / x[0], rel=1e-9)
    assert info[0] == pytest.approx((x**2 * e * np.exp(b[0] * x)).sum())


def test_the_posterior_mode_maximises_the_penalised_likelihood():
    y = np.array([0.0, 3.0, 1.0, 5.0, 0.0, 2.0])
    e = np.array([0.5, 1.0, 0.2, 2.0, 0.1, 1.5])
    x = -np.log(1 - np.array([0.1, 0.3, 0.2, 0.5, 0.25, 0.15]))
    group = np.array([0, 0, 1, 1, 2, 2])
    prior, precision = np.array([1.0, 0.5, 2.0, 1.0]), 2.5
    b, _ = poisson_slopes(y, e, x, group, prior, precision)
    for g in range(3):
        m = group == g

        def loss(v, m=m, g=g):
            return (
                -(y[m] * v * x[m] - e[m] * np.exp(v * x[m])).sum()
                + precision / 2 * (v - prior[g]) ** 2
            )

        assert b[g] == pytest.approx(minimize_scalar(loss).x, abs=1e-6)
    assert b[3] == prior[3]  # no cells: the prior


def test_the_spread_of_planted_slopes_is_recovered_and_shrinking_helps():
    rng = np.random.default_rng(0)
    groups, tau2 = 400, 0.25
    truth = 1.0 + rng.normal(0, math.sqrt(tau2), groups)
    n = rng.integers(1, 30, groups)  # promoted cells per group: information varies
    group = np.repeat(np.arange(groups), n)
    e = rng.gamma(2.0, 1.0, len(group))
    x = -np.log(1 - rng.choice([0.1, 0.2, 0.3, 0.5], len(group)))
    y = rng.poisson(e * np.exp(truth[group] * x)).astype(np.float64)
    prior = np.ones(groups)
    mle, info = poisson_slopes(y, e, x, group, prior, 0.0)
    assert moment_variance(mle, info, prior) == pytest.approx(tau2, rel=0.3)
    shrunk, _ = shrunk_slopes(y, e, x, group, prior)
    assert ((shrunk - truth) ** 2).mean() < 0.7 * ((mle - truth) ** 2).mean()


def test_too_few_measured_groups_take_the_default_spread():
    assert moment_variance(np.array([1.0, 2.0]), np.array([50.0, 50.0]), np.zeros(2)) == (
        DEFAULT_VARIANCE
    )


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(0, 12), min_size=1, max_size=8),
    st.floats(0.05, 0.6),
    st.floats(-1.0, 3.0),
    st.floats(0.1, 20.0),
)
def test_a_shrunk_slope_lies_between_its_prior_and_its_data(units, depth, prior, precision):
    y = np.array(units, dtype=np.float64)
    e, x = np.ones(len(y)), np.full(len(y), -math.log(1 - depth))
    group, p = np.zeros(len(y), np.int64), np.array([prior])
    mle = poisson_slopes(y, e, x, group, p, 0.0)[0][0]
    b = poisson_slopes(y, e, x, group, p, precision)[0][0]
    assert min(mle, prior) - 1e-6 <= b <= max(mle, prior) + 1e-6


def test_a_category_without_cells_takes_the_overall_slope():
    y, e = np.array([4.0, 4.0, 2.0]), np.array([1.0, 1.0, 2.0])
    x = -np.log(1 - np.array([0.5, 0.5, 0.2]))
    product = np.array([1, 1, 2])
    category_of = np.array([0, 1, 1, 2])  # product 3 (category 2) never cut
    own, category, overall = hierarchical_slopes(y, e, x, product, category_of)
    assert category[2] == overall and own[3] == overall and category[0] == overall
    assert own[1] > own[2]  # 4 against 1 at half price beats 2 against 2 at 20% off
