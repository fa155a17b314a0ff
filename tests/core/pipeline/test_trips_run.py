"""``trip_forecast`` on the tiny warehouse: every known customer on every test week, every test
trip of a known customer scored for its store, the half-life picked on validation weeks."""

import json

import polars as pl

from retailsim_core.pipeline.trips_run import run_trip_check
from retailsim_core.tables import TRIPS_TABLE


def test_the_check_forecasts_every_known_customer_week(tiny_warehouse, tmp_path):
    wh, split = tiny_warehouse["warehouse"], tiny_warehouse["split"]
    scores = run_trip_check(wh, split, tmp_path, n_boot=50)
    visits = pl.read_parquet(tmp_path / "trip_forecast.parquet")
    first, last = split.valid_end + 1, max(wh.weeks(TRIPS_TABLE))
    trips = wh.scan(TRIPS_TABLE).collect()
    known = trips.filter(pl.col("week") < first)["customer_id"].unique()
    assert visits.height == known.len() * (last - first + 1) == scores["visits"]["customer_weeks"]
    test = trips.filter((pl.col("week") >= first) & pl.col("customer_id").is_in(known.implode()))
    assert visits["trips"].sum() == test.height  # every test trip of a known customer counted
    assert visits["p_visit"].is_between(0, 1).all()
    assert (visits["expected_trips"] == visits["p_visit"] * visits["trips_per_visit"]).all()
    # every forecast customer-week's stores, shares adding up to one
    shares = pl.read_parquet(tmp_path / "store_shares.parquet")
    per_week = shares.group_by("customer_id", "week").agg(pl.col("share").sum(), n=pl.len())
    assert per_week.height == visits.height
    assert per_week["share"].is_between(1 - 1e-9, 1 + 1e-9).all() and per_week["n"].max() <= 2
    # a store is forecast for every test trip of a customer with a trip in an earlier week
    first_week = trips.group_by("customer_id").agg(first=pl.col("week").min())
    with_past = trips.join(first_week, on="customer_id").filter(
        (pl.col("week") >= first) & (pl.col("week") > pl.col("first"))
    )
    assert scores["stores"]["trips"] == with_past.height
    assert str(scores["stores"]["half_life"]) in scores["stores"]["validation_accuracy"]
    assert json.loads((tmp_path / "scores.json").read_text())["test_weeks"] == [first, last]
