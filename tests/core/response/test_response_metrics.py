"""Response metrics: a perfect method scores perfectly, a timid one is caught by the slope and
the lift ratio, and a paired WAPE difference has its own product-resampled interval."""

import math

import numpy as np
import polars as pl
import pytest

from retailsim_core.response.response_metrics import (
    paired_difference,
    percentile_interval,
    predicted_lifts,
    product_resamples,
    response_metrics,
)


def _events() -> tuple[pl.DataFrame, pl.DataFrame]:
    """8 products at 2 stores, one event each; product p's promotion lifts units from 10 to
    10 * (1 + p / 4); observed lifts are those exactly."""
    rows = [
        (f"P{p}", f"S{s}", 10.0 * (1 + p / 4), 10.0 * (1 + p / 4), 10.0)
        for p in range(8)
        for s in range(2)
    ]
    events = pl.DataFrame(
        rows,
        schema=["product_id", "store_id", "units", "perfect_on", "perfect_off"],
        orient="row",
    )
    observed = predicted_lifts(events, "perfect_on", "perfect_off")
    return events, observed


def test_predicted_lifts_follow_the_observed_definition():
    events = pl.DataFrame(
        {
            "product_id": ["A", "A", "A"],
            "store_id": ["S1", "S1", "S2"],
            "on": [3.0, 5.0, 1.0],
            "off": [1.0, 1.0, 1.0],
        }
    )
    lift = predicted_lifts(events, "on", "off")
    # S1: log((4 + 1) / (1 + 1)) with 2 events; S2: log(2 / 2) with 1
    assert lift["lift"][0] == pytest.approx(2 * math.log(5 / 2) / 3)
    assert lift["events"][0] == 3


def test_a_perfect_method_scores_perfectly_and_a_timid_one_does_not():
    events, observed = _events()
    weights = product_resamples(observed.height, 200, seed=0)
    perfect = response_metrics(observed, events, "perfect_on", "perfect_off", weights).summary
    assert perfect["spearman"] == pytest.approx(1.0)
    assert perfect["calibration_slope"] == pytest.approx(1.0)
    assert perfect["mean_lift_ratio"] == pytest.approx(1.0)
    assert perfect["wape"] == pytest.approx(0.0)
    assert (perfect["products"], perfect["events"]) == (8, 16)
    lo, hi = perfect["calibration_slope_ci"]
    assert lo == pytest.approx(1.0) and hi == pytest.approx(1.0)
    # Half of every log-lift: the same order, but observed lifts are twice the predicted ones.
    timid = events.with_columns(
        timid_on=(((pl.col("units") + 1) / 11).log() / 2).exp() * 11 - 1,
        timid_off=pl.lit(10.0),
    )
    t = response_metrics(observed, timid, "timid_on", "timid_off", weights).summary
    assert t["spearman"] == pytest.approx(1.0)
    assert t["calibration_slope"] == pytest.approx(2.0)
    assert t["mean_lift_ratio"] == pytest.approx(0.5)
    assert t["wape"] > 0.05


def test_a_paired_difference_has_an_interval_that_excludes_zero_only_when_it_should():
    events, observed = _events()
    weights = product_resamples(observed.height, 300, seed=1)
    rng = np.random.default_rng(0)
    noisy = events.with_columns(
        near=pl.col("units") * pl.Series(rng.uniform(0.97, 1.03, events.height)),
        far=pl.col("units") * pl.Series(rng.uniform(0.5, 1.5, events.height)),
    )
    near = response_metrics(observed, noisy, "near", "perfect_off", weights)
    far = response_metrics(observed, noisy, "far", "perfect_off", weights)
    diff = paired_difference(near, far)
    assert diff["wape_difference"] < 0 and diff["wape_difference_ci"][1] < 0
    same = paired_difference(near, near)
    assert same["wape_difference"] == 0 and same["wape_difference_ci"] == [0.0, 0.0]


def test_products_without_a_prediction_count_as_no_response():
    events, observed = _events()
    weights = product_resamples(observed.height, 50, seed=2)
    partial = events.filter(pl.col("product_id") != "P7")
    out = response_metrics(observed, partial, "perfect_on", "perfect_off", weights).summary
    assert out["products"] == 8 and out["mean_lift_ratio"] < 1.0


def test_calibration_bins_hold_equal_events_and_weighted_means():
    from retailsim_core.response.response_metrics import calibration_bins

    products = pl.DataFrame(
        {
            "product_id": ["a", "b", "c", "d"],
            "observed_lift": [0.0, 0.2, 0.4, 1.0],
            "wm": [0.1, 0.2, 0.3, 0.4],
            "events": [1, 1, 1, 3],
        }
    )
    bins = calibration_bins(products, "wm", bins=2)
    # Half of the 6 events: a, b, c (3 events) then d (3 events).
    assert [b["products"] for b in bins] == [3, 1] and [b["events"] for b in bins] == [3, 3]
    assert bins[0]["predicted"] == pytest.approx(0.2) and bins[0]["observed"] == pytest.approx(0.2)
    assert bins[1]["predicted"] == pytest.approx(0.4) and bins[1]["observed"] == pytest.approx(1.0)
    assert calibration_bins(products.head(0), "wm") == []


def test_predicted_lifts_are_the_same_bytes_every_call():
    """A product's lift adds its stores' lifts in store order, not in the order a parallel
    group_by hands the stores over (which changed the last digits from call to call)."""
    rng = np.random.default_rng(0)
    n_products, n_stores = 300, 100
    events = pl.DataFrame(
        {
            "product_id": np.repeat([f"P{p:03d}" for p in range(n_products)], n_stores * 2),
            "store_id": np.tile(np.repeat([f"S{s:03d}" for s in range(n_stores)], 2), n_products),
            "on": rng.gamma(2.0, 3.0, n_products * n_stores * 2),
            "off": rng.gamma(2.0, 2.0, n_products * n_stores * 2),
        }
    )
    want = predicted_lifts(events, "on", "off")
    for _ in range(8):
        assert predicted_lifts(events, "on", "off").equals(want)


def test_an_interval_reads_the_finite_draws_and_is_null_without_one():
    draws = np.array([np.nan, np.inf, *np.arange(101.0), -np.inf])
    assert percentile_interval(draws) == [2.5, 97.5]
    assert percentile_interval(np.array([np.nan, np.inf])) == [None, None]
