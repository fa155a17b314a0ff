"""``world_model_demand`` on the tiny warehouse: the world model's forecast of every
``demand_forecast`` cell-week, its calibration week before the test weeks, and every method
scored on the same rows with paired differences to the world model's."""

import json

import polars as pl
import pytest

from retailsim_core.pipeline.world_demand_run import WORLD


@pytest.fixture(scope="module")
def world_demand(tiny_world_demand):
    return tiny_world_demand["root"], tiny_world_demand["scores"], tiny_world_demand["split"]


def test_every_cell_week_gets_the_world_models_forecast(world_demand):
    root, scores, split = world_demand
    baseline = pl.read_parquet(root / "demand" / "demand_forecast.parquet")
    frame = pl.read_parquet(root / "out" / "world_model_demand.parquet")
    key = ["product_id", "store_id", "week"]
    assert frame.select(key).equals(baseline.select(key))  # the same rows, in the same order
    assert frame["observed_units"].equals(baseline["observed_units"])
    for m in WORLD:
        assert frame[m].is_not_null().all() and (frame[m] >= 0).all()
    assert frame["world_model"].sum() > 0  # the model puts units on the panel's cells
    assert (frame["quantity"] >= 1).all()
    assert set(scores["all"]) >= {*WORLD, "lightgbm_l1", "poisson_fe", "seasonal_naive"}
    for figures in scores["all"].values():
        assert "wape_minus_world_model_interval" in figures
        assert "wape_minus_world_model_median_interval" in figures
    calibration = scores["calibration"]
    assert calibration["week"] == split.valid_end  # the week before the test weeks
    assert calibration["factor"] == pytest.approx(
        calibration["observed_units"] / calibration["model_units"]
    )
    assert scores["contexts"] > 0
    # the promotion counterfactual: unchanged at store-weeks where the plan promotes nothing
    promoted = frame.filter(pl.col("promotion") != "none").select("store_id", "week").unique()
    plain = frame.join(promoted, on=["store_id", "week"], how="anti")
    assert plain["world_model_no_promotion"].equals(plain["world_model"])
    lift = scores["promotion_lift"]
    assert lift["min_events"] == 10 and "ceiling" in lift
    assert json.loads((root / "out" / "scores.json").read_text())["cell_weeks"] == frame.height


def test_the_median_forecast_is_the_poisson_median_of_the_buyers(world_demand, tiny_warehouse):
    """The buyers' Poisson median × the median units of one of the product's lines before the
    test weeks (1 for a product without one)."""
    from scipy.stats import poisson

    from retailsim_core.tables import RAW_TABLE

    root, _, split = world_demand
    medians = (
        tiny_warehouse["warehouse"].scan(RAW_TABLE)
        .filter((pl.col("quantity") > 0) & (pl.col("week") <= split.valid_end))
        .group_by("product_id").agg(line=pl.col("quantity").cast(pl.Float64).median())
        .collect()
    )  # fmt: skip
    frame = (
        pl.read_parquet(root / "out" / "world_model_demand.parquet")
        .join(medians, on="product_id", how="left", maintain_order="left")
        .with_columns(pl.col("line").fill_null(1.0))
    )
    buyers = frame["world_model_buyers"].to_numpy()
    expected = poisson.median(buyers) * frame["line"].to_numpy()
    assert frame["world_model_median"].to_numpy() == pytest.approx(expected, nan_ok=False)


def test_the_inputs_of_a_plan_forecast_are_written(world_demand):
    """The test weeks' forecast contexts, the units per line and the calibration: what the
    service forecasts a plan of those weeks with."""
    from retailsim_core.demand.world.plan_forecast import DemandInputs

    root, scores, split = world_demand
    inputs = DemandInputs.read(root / "out")
    assert inputs is not None and inputs.factor == scores["calibration"]["factor"]
    weeks = sorted(inputs.contexts["week"].unique().to_list())
    assert weeks[0] == split.valid_end + 1 and weeks[-1] == scores["test_weeks"][1]
    assert inputs.contexts.height == scores["contexts"] and (inputs.contexts["weight"] > 0).all()
    assert DemandInputs.read(root / "demand") is None  # a folder without them: no forecast
