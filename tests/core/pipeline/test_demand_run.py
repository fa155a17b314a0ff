"""``demand_forecast`` on the tiny warehouse: every test week of every cell that sold before
them, observed units that add up to the raw lines, every method's forecasts (the libraries'
included), and scores for all and promoted rows."""

import json

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from retailsim_core.demand.cells.check import LIBRARY_METHODS, counting_methods
from retailsim_core.pipeline.demand_run import run_demand_check
from retailsim_core.tables import RAW_TABLE


def test_the_check_forecasts_every_test_cell_week(tiny_warehouse, tmp_path):
    wh, split = tiny_warehouse["warehouse"], tiny_warehouse["split"]
    scores = run_demand_check(wh, split, tmp_path, n_boot=50)
    frame = pl.read_parquet(tmp_path / "demand_forecast.parquet")
    first, last = split.valid_end + 1, max(wh.weeks(RAW_TABLE))
    assert sorted(frame["week"].unique()) == list(range(first, last + 1))
    cells = frame.select("product_id", "store_id").unique().height
    assert frame.height == cells * (last - first + 1) == scores["cell_weeks"]
    raw = wh.scan(RAW_TABLE).filter(pl.col("week") >= first).collect()
    sold_before = (
        wh.scan(RAW_TABLE)
        .filter(pl.col("week") < first)
        .select("product_id", "store_id")
        .unique()
        .collect()
    )
    expected = raw.join(sold_before, on=["product_id", "store_id"])["quantity"].sum()
    assert frame["observed_units"].sum() == expected  # every shopper's units of those cells
    methods = {*counting_methods(), *LIBRARY_METHODS}
    assert set(scores["all"]) == methods and 0 < scores["all"]["seasonal_naive"]["wape"]
    assert scores["all"]["no_sale"]["wape"] == 1.0  # what WAPE gives a forecast of nothing
    for m in LIBRARY_METHODS:  # forecasts, not missing values, on every test cell-week
        assert frame[m].is_not_null().all() and (frame[m] >= 0).all()
    assert "display" in scores["poisson_fe"]["coefficients"]
    lines = pl.read_parquet(tmp_path / "quantity_forecast.parquet")
    assert lines.height == raw.filter(pl.col("quantity") > 0).height == scores["quantity"]["lines"]
    assert (lines["quantity_model"] >= 1).all() and "log_price_index" in lines.columns
    assert json.loads((tmp_path / "scores.json").read_text())["cell_weeks"] == frame.height


@pytest.mark.slow
def test_chunks_of_products_give_the_scores_and_forecasts_of_one_pass(tiny_warehouse, tmp_path):
    from retailsim_core.demand.cells.check import DemandConfig

    wh, split = tiny_warehouse["warehouse"], tiny_warehouse["split"]
    one = run_demand_check(wh, split, tmp_path / "one", n_boot=50)
    many = run_demand_check(wh, split, tmp_path / "many", n_boot=50,
                            cfg=DemandConfig(max_chunk_cells=7))  # fmt: skip
    assert one["chunks"] == 1 and many["chunks"] > 3
    for key in ("mase_scale", "cell_weeks", "quantity"):
        assert many[key] == one[key]
    for method, figures in one["all"].items():  # sums in another order: the last bits move
        for name, value in figures.items():
            assert many["all"][method][name] == pytest.approx(value, rel=1e-12), (method, name)
    a = pl.read_parquet(tmp_path / "one" / "demand_forecast.parquet")
    b = pl.read_parquet(tmp_path / "many" / "demand_forecast.parquet")
    assert_frame_equal(a, b, check_exact=False, rel_tol=1e-12)  # a cell's sums, in another order
    again = run_demand_check(wh, split, tmp_path / "again", n_boot=50)  # same data, same bytes
    assert {k: v for k, v in again.items() if k not in ("seconds", "seconds_by")} == {
        k: v for k, v in one.items() if k not in ("seconds", "seconds_by")
    }
    assert a.equals(pl.read_parquet(tmp_path / "again" / "demand_forecast.parquet"))
