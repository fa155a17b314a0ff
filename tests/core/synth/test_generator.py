"""The synthetic LGSR generator: format, determinism, and the behaviour it plants."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from retailsim_core.ingest.lgsr import FULL_HEADER, SAMPLE_HEADER
from retailsim_core.synth import build_world, load_world, preset
from retailsim_core.synth.baskets import simulate_week
from retailsim_core.synth.writer import generate, week_frame


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_same_seed_gives_identical_bytes(tmp_path, tiny_cfg):
    for run in ("a", "b"):
        generate(
            tiny_cfg,
            tmp_path / run / "raw",
            tmp_path / run / "truth",
            weeks=range(1, 4),
            compress=True,
        )
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    generate(
        tiny_cfg.replace(seed=7),
        tmp_path / "c" / "raw",
        tmp_path / "c" / "truth",
        weeks=range(1, 4),
    )
    assert _digest(tmp_path / "a" / "truth") != _digest(tmp_path / "c" / "truth")


def test_files_follow_the_lgsr_format(tiny_dataset):
    files = sorted(p.name for p in tiny_dataset["raw"].iterdir() if p.name.startswith("trans"))
    assert files[0] == "transactions_200607.csv" and "transactions_200610.csv" not in files
    df = pl.read_csv(tiny_dataset["raw"] / "transactions_200607.csv", infer_schema=False)
    assert tuple(df.columns) == FULL_HEADER
    assert df["PROD_CODE"].str.contains(r"^PRD09\d{5}$").all()
    assert df["BASKET_ID"].str.len_chars().eq(15).all()
    assert df["SPEND"].str.contains(r"^\d+\.\d{2}$").all()
    carded = df.filter(pl.col("CUST_CODE").is_not_null())
    assert carded["CUST_CODE"].str.contains(r"^CUST\d{10}$").all()
    # One customer, store, date, hour and mission per basket.
    per_basket = df.group_by("BASKET_ID").agg(
        pl.col(c).n_unique()
        for c in ("CUST_CODE", "STORE_CODE", "SHOP_DATE", "SHOP_HOUR", "BASKET_TYPE")
    )
    assert (per_basket.drop("BASKET_ID").max_horizontal() == 1).all()


def test_sample_header_variant(tmp_path, tiny_cfg):
    generate(tiny_cfg, tmp_path / "raw", tmp_path / "truth", header="sample", weeks=[1])
    df = pl.read_csv(tmp_path / "raw" / "transactions_200607.csv", infer_schema=False)
    assert tuple(df.columns) == SAMPLE_HEADER
    assert set(df["seg_1"].drop_nulls()) <= {"AZ", "BG", "CT", "DY"}
    assert set(df["seg_2"].drop_nulls()) <= {"AT", "BU", "CZ", "DI", "EQ", "FN"}


def test_ground_truth_round_trip_rebuilds_the_same_world(tiny_dataset, tiny_cfg):
    built, loaded = build_world(tiny_cfg), load_world(tiny_dataset["truth"])
    assert loaded.cfg == tiny_cfg
    a, b = simulate_week(built, 9), simulate_week(loaded, 9)
    for field in ("b_customer", "b_store", "l_basket", "l_product", "l_quantity", "l_spend"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


@pytest.fixture(scope="module")
def tiny_year():
    """All 117 weeks of the tiny world, in memory (LGSR rows + true baskets)."""
    world = build_world(preset("tiny"))
    frames = [week_frame(world, w, simulate_week(world, w)) for w in range(1, 118)]
    return world, pl.concat(f[0] for f in frames), pl.concat(f[1] for f in frames)


def test_planted_population_behaviour(tiny_year):
    world, lines, truth = tiny_year
    uncarded = lines["CUST_CODE"].eq("").mean()
    assert 0.10 < uncarded < 0.30  # LGSR: ~20% of rows
    carded = lines.filter(pl.col("CUST_CODE") != "").with_columns(
        pl.col("SHOP_WEEK").cast(pl.Int32)
    )
    first = carded.group_by("CUST_CODE", "PROD_CODE").agg(pl.col("SHOP_WEEK").min().alias("first"))
    late = carded.filter(pl.col("SHOP_WEEK") >= 200720).join(first, on=["CUST_CODE", "PROD_CODE"])
    assert (late["first"] < late["SHOP_WEEK"]).mean() > 0.75  # strong repeat habit
    starts = truth.group_by("customer_idx").agg(pl.col("week").min())
    assert starts["week"].max() > 80  # cold-start customers exist


def test_late_store_and_novel_products_appear_only_when_planted(tiny_year):
    world, _, truth = tiny_year
    cat = world.catalogue
    late = int(np.argmax(cat.store_open_week))
    visits = truth.filter(pl.col("store_idx") == late)["week"]
    assert visits.min() >= cat.store_open_week[late] and visits.len() > 0
    lines = tiny_year[1].with_columns(pl.col("SHOP_WEEK").cast(pl.Int32))
    launch = pl.DataFrame({"PROD_CODE": cat.product_code, "launch_week": cat.launch_week})
    from retailsim_core.calendar import week_of_shop_week

    sold = lines.group_by("PROD_CODE").agg(pl.col("SHOP_WEEK").min()).join(launch, on="PROD_CODE")
    first_week = sold["SHOP_WEEK"].map_elements(week_of_shop_week, return_dtype=pl.Int64)
    assert (first_week >= sold["launch_week"]).all()
    assert (sold["launch_week"] > 80).any()  # novel products are sold


def test_prices_follow_the_promotion_calendar(tiny_year):
    world, lines, truth = tiny_year
    cat, prices = world.catalogue, world.prices
    basket_week = dict(
        zip(truth["basket_id"].cast(pl.String).to_list(), truth["week"].to_list(), strict=True)
    )
    weeks = np.array([basket_week[b] for b in lines["BASKET_ID"].to_list()])
    p = np.searchsorted(cat.product_code, lines["PROD_CODE"].to_numpy())
    t = np.searchsorted(cat.store_code, lines["STORE_CODE"].to_numpy())
    unit = (
        lines["SPEND"].cast(pl.Float64).to_numpy() / lines["QUANTITY"].cast(pl.Float64).to_numpy()
    )
    expected = np.empty_like(unit)
    for week in np.unique(weeks):  # shelf() is vectorised within a week
        rows = weeks == week
        expected[rows] = prices.shelf(cat, int(week), p[rows], t[rows])
    np.testing.assert_allclose(unit, expected, atol=0.006)
    promoted = prices.depth[weeks, p, cat.store_region[t]] > 0
    assert 0.02 < promoted.mean() < 0.5
    # Demand responds to price: promoted lines sell more units per line than unpromoted ones.
    qty = lines["QUANTITY"].cast(pl.Int64).to_numpy()
    assert qty[promoted].mean() > qty[~promoted].mean()


def test_xlarge_is_large_with_twice_the_customers():
    """The scale check's preset (issue #37) differs from ``large`` in its customers alone."""
    large, xlarge = preset("large"), preset("xlarge")
    assert xlarge.n_customers == 2 * large.n_customers
    assert xlarge.replace(name="large", n_customers=large.n_customers) == large
