"""The world model's unit forecast, its pure parts on tiny frames: where a customer-week's
trips go (stores, weights, a context made before the week), units per line, the median."""

import datetime as dt

import numpy as np
import polars as pl
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from retailsim_core.demand.trips.visits import store_shares
from retailsim_core.demand.world.shopper_units import line_units
from retailsim_core.demand.world.world_demand import (
    cell_quantity,
    forecast_contexts,
    line_quantities,
    median_units,
    poisson_median,
    realized_contexts,
    world_forecasts,
)

MONDAY = dt.date(2020, 1, 6)  # week 1's Monday


def _trips(rows) -> pl.LazyFrame:
    """(customer, week, store, weekday 1-7, hour) trips, dated in their week."""
    return pl.DataFrame(
        [(c, w, s, MONDAY + dt.timedelta(weeks=w - 1, days=d - 1), h) for c, w, s, d, h in rows],
        schema={"customer_id": pl.String, "week": pl.Int16, "store_id": pl.String,
                "shop_date": pl.Date, "shop_hour": pl.Int8},
        orient="row",
    ).lazy()  # fmt: skip


def test_store_shares_keep_the_top_stores_renormalised_from_earlier_weeks():
    trips = _trips([("A", 1, "S1", 1, 9), ("A", 2, "S1", 1, 9), ("A", 3, "S2", 1, 9),
                    ("A", 3, "S3", 1, 9), ("A", 5, "S3", 1, 9)])  # fmt: skip
    at = pl.LazyFrame({"customer_id": ["A"], "week": pl.Series([4], dtype=pl.Int16)})
    out = store_shares(trips, at, half_life=1e9, max_stores=2, min_share=0.2).collect()
    # counts S1 2, S2 1, S3 1 (week 5 is not before week 4): S1 and the first of the tie
    assert out.select("store_id", "share").rows() == [("S1", pytest.approx(2 / 3)),
                                                      ("S2", pytest.approx(1 / 3))]  # fmt: skip
    alone = store_shares(trips, at, half_life=1e9, max_stores=2, min_share=0.3).collect()
    assert alone.select("store_id", "share").rows() == [("S1", 1.0)]  # S2's 1/4 is below 0.3


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(4, 8), st.sampled_from(["S1", "S2", "S3"])), max_size=6))
def test_contexts_of_week_w_read_nothing_of_the_forecast_weeks(later):
    """A trip of week w (a forecast week, 4 on) changes no context of weeks up to w: neither
    the stores, their shares, nor the day and hour (one week ahead, as every forecast)."""
    before = [("A", 1, "S1", 3, 9), ("A", 2, "S2", 5, 17), ("B", 3, "S1", 2, 11)]
    expected = pl.LazyFrame(
        {"customer_id": ["A", "A", "B"], "week": pl.Series([4, 5, 4], dtype=pl.Int16),
         "expected_trips": [1.5, 0.5, 1.0]}
    )  # fmt: skip

    def contexts(rows):
        trips = _trips(rows)
        at = expected.select("customer_id", "week")
        shares = store_shares(trips, at, half_life=2.0, max_stores=2, min_share=0.1)
        return forecast_contexts(expected, shares, trips, first_forecast_week=4,
                                 first_monday=MONDAY).collect()  # fmt: skip

    base = contexts(before)
    upto = pl.col("week") <= min((w for w, _ in later), default=99)
    changed = contexts(before + [("A", w, s, 1, 8) for w, s in later])
    assert base.filter(upto).equals(changed.filter(upto))
    a4 = base.filter((pl.col("customer_id") == "A") & (pl.col("week") == 4))
    assert a4["weight"].sum() == pytest.approx(1.5)  # the expected trips, split by the shares
    assert a4["store_id"].to_list() == ["S1", "S2"]
    # the weekday (Friday) and hour of A's last trip before week 4, in week 4
    assert a4["date"].to_list() == [MONDAY + dt.timedelta(weeks=3, days=4)] * 2
    assert a4["hour"].to_list() == [17, 17]


def test_calibration_contexts_are_the_weeks_trips_of_known_customers():
    trips = _trips([("A", 1, "S1", 1, 9), ("A", 2, "S2", 3, 10), ("B", 2, "S1", 1, 9)])
    out = realized_contexts(trips, 2).collect()
    assert out.select("customer_id", "store_id", "hour", "weight").rows() == [("A", "S2", 10, 1.0)]


def test_units_per_line_scale_the_units_beyond_the_first_by_the_plan():
    raw = pl.LazyFrame({"product_id": ["P", "P", "P", "Q"], "week": [1, 2, 9, 1],
                        "quantity": [1, 3, 50, 0]})  # fmt: skip
    means = line_quantities(raw, first_forecast_week=5)
    # week 9 is a forecast week; Q no line
    assert means.collect().rows() == [("P", 2.0, 2.0)]
    cells = pl.LazyFrame({"product_id": ["P", "P", "Q"],
                          "promotion": ["none", "display+mailer", "mailer"]})  # fmt: skip
    out = cell_quantity(cells, means, {"display": 0.5, "mailer": None}, overall=1.4).collect()
    assert out["quantity"].to_list() == pytest.approx([2.0, 1 + np.exp(0.5), 1.4])
    # a cut on the shelf: the stock-up effect of log(1 - depth), none without a coefficient
    cut = cells.with_columns(depth=pl.Series([0.5, 0.0, None]))
    coef = {"display": 0.5, "log_price_index": -1.5}
    out = cell_quantity(cut, means, coef, overall=1.4).collect()
    assert out["quantity"].to_list() == pytest.approx([1 + 0.5**-1.5, 1 + np.exp(0.5), 1.4])
    # the same units per line as the calibration's totals read them on a shelf (one place each
    # for a frame and a tensor: they must agree)
    shelf = torch.tensor([[[0.5, 0.0, 0.0], [0.0, 1.0, 1.0]]])  # (1, 2, 3) depth, display, mailer
    twin = line_units(torch.tensor([2.0, 2.0], dtype=torch.float64), coef, shelf)
    assert twin[0].tolist() == pytest.approx(out["quantity"].to_list()[:2])


def test_the_median_forecast_is_the_buyers_poisson_median_times_a_lines_median():
    got = poisson_median(np.array([0.0, 0.3, 0.7, 1.0, 5.0]))
    assert got.tolist() == [0.0, 0.0, 1.0, 1.0, 5.0]
    units = median_units(np.array([0.3, 0.7, 5.0]), np.array([2.0, 2.0, 1.0]))
    assert units.tolist() == [0.0, 2.0, 5.0]


def test_the_forecasts_combine_buyers_units_per_line_and_the_factor():
    cells = pl.DataFrame({"product_id": ["P", "P", "Q"], "store_id": ["S", "S", "S"],
                          "week": [5, 6, 5], "promotion": ["none", "mailer", "none"]})  # fmt: skip
    lines = pl.DataFrame({"product_id": ["P"], "mean_quantity": [1.5], "median_quantity": [1.0]})
    fit = {"coefficients": {"display": None, "mailer": 0.4, "log_price_index": -1.0},
           "mean_quantity": 1.2}  # fmt: skip
    depth = np.array([0.0, 0.2, 0.5])  # Q is cut without a display or mailer
    out = world_forecasts(cells, lines, fit, np.array([0.5, 1.0, 0.2]), np.array([0.5, 0.6, 0.2]),
                          depth, factor=2.0)  # fmt: skip
    mailer_q = 1 + 0.5 * np.exp(0.4) / 0.8
    q_cut = 1 + 0.2 / 0.5
    assert out["world_model_buyers"].to_list() == pytest.approx([1.0, 2.0, 0.4])
    assert out["world_model"].to_list() == pytest.approx([1.5, 2 * mailer_q, 0.4 * q_cut])
    # Poisson medians of 1, 2 and 0.4 buyers × a line's median (1; Q has no line: 1)
    assert out["world_model_median"].to_list() == [1.0, 2.0, 0.0]
    # without the promotion: fewer buyers and the units per line without the mailer's effect or
    # the promoted cell's cut; Q was not promoted, so its cut stays
    assert out["world_model_no_promotion"].to_list() == pytest.approx([1.5, 1.2 * 1.5, 0.4 * q_cut])
    assert "depth" not in out.columns
