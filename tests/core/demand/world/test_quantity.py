"""Units per line: the shelf a line saw (other stores' prices, the plan), the stock-up model
and its scores, on tiny and planted frames."""

import math

import numpy as np
import polars as pl
import pytest

from retailsim_core.demand.world.quantity import (
    QuantityConfig,
    line_frame,
    quantity_forecasts,
    quantity_scores,
)

PLAN = pl.LazyFrame(
    {"week": [5], "product_id": ["A"], "store_id": ["S2"], "display": [True], "mailer": [False]}
)


def _raw(rows) -> pl.LazyFrame:
    return pl.DataFrame(
        rows, orient="row",
        schema={"product_id": pl.String, "store_id": pl.String, "week": pl.Int16,
                "quantity": pl.Int32, "spend": pl.Float64},
    ).lazy()  # fmt: skip


def test_a_line_sees_the_other_stores_price_never_its_own():
    rows = [("A", "S1", 1, 1, 2.0), ("A", "S1", 5, 2, 2.0), ("A", "S2", 5, 1, 2.0),
            ("A", "S3", 6, 0, 0.0)]  # fmt: skip
    out = line_frame(_raw(rows), PLAN, first_forecast_week=5).sort("store_id", "week").collect()
    assert out.height == 3  # the zero-quantity line is not a purchase
    got = out.select("store_id", "week", "log_price_index", "display").rows()
    # typical price before week 5: 2.0. S1 in week 5 sees S2's 2.0, S2 sees S1's 1.0 a unit
    assert got == [
        ("S1", 1, 0.0, 0.0),  # nobody else sold it that week: no shelf signal
        ("S1", 5, pytest.approx(0.0), 0.0),
        ("S2", 5, pytest.approx(math.log(0.5)), 1.0),
    ]
    # a multi-buy that lowers S1's own unit price leaves S1's index as it was
    cheaper = [*rows[:1], ("A", "S1", 5, 2, 1.0), *rows[2:]]
    again = line_frame(_raw(cheaper), PLAN, first_forecast_week=5).sort("store_id", "week")
    assert again.collect()["log_price_index"][1] == pytest.approx(0.0)


def _planted(slope: float, n_products=60, n_weeks=40, seed=0) -> pl.DataFrame:
    """Lines whose units beyond the first are Poisson(level × index^slope)."""
    rng = np.random.default_rng(seed)
    level = rng.gamma(2.0, 0.4, n_products)
    product = np.repeat(np.arange(n_products), n_weeks * 20)
    week = np.tile(np.repeat(np.arange(1, n_weeks + 1), 20), n_products)
    log_index = np.where(
        rng.random(len(product)) < 0.3, np.log(rng.uniform(0.5, 0.9, len(product))), 0.0
    )
    quantity = 1 + rng.poisson(level[product] * np.exp(slope * log_index))
    return pl.DataFrame({
        "product_id": [f"P{p:02d}" for p in product], "store_id": "S",
        "week": week.astype(np.int16), "quantity": quantity.astype(np.float64),
        "log_price_index": log_index, "display": 0.0, "mailer": 0.0,
    })  # fmt: skip


def test_the_stock_up_model_recovers_a_planted_price_response_and_beats_the_mean():
    lines = _planted(slope=-2.0)
    test, fit = quantity_forecasts(lines, first_forecast_week=31, cfg=QuantityConfig(30))
    assert fit["coefficients"]["log_price_index"] == pytest.approx(-2.0, abs=0.15)
    assert fit["coefficients"]["display"] is None  # no variation: dropped, not invented
    assert test["week"].min() == 31 and test.height == 60 * 10 * 20
    scores = quantity_scores(test, n_boot=100, seed=0)
    model, mean = scores["promoted"]["quantity_model"], scores["promoted"]["product_mean"]
    assert model["mae"] < mean["mae"] and model["mae_minus_product_mean_interval"][1] < 0
    assert abs(model["bias"]) < 0.05 and scores["all"]["lines"] == test.height
    # without its promotion a line is forecast at its unpromoted level: the model's own lift
    plain = test.filter(pl.col("log_price_index") == 0.0)
    assert (plain["quantity_model"] - plain["quantity_no_promotion"]).abs().max() < 1e-12
    cut = test.filter(pl.col("log_price_index") < 0.0)
    assert (cut["quantity_model"] > cut["quantity_no_promotion"]).all()


def test_with_no_response_planted_the_model_finds_none():
    _, fit = quantity_forecasts(_planted(slope=0.0), first_forecast_week=31, cfg=QuantityConfig(30))
    assert abs(fit["coefficients"]["log_price_index"]) < 0.1
