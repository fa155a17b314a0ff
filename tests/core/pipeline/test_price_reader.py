"""The one shelf reader (D96) on the default data: every week it materialises from the stored
observed rows is the dense engine's table cell for cell, and its price features are the joined
reference's, exactly."""

import shutil

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from retailsim_core.features.feature_tables import (
    PRICE_STATE_SCHEMA,
    next_price_state,
    price_features,
)
from retailsim_core.ingest.lgsr import RAW_TRANSACTIONS_SCHEMA
from retailsim_core.pipeline.price_reader import (
    price_weeks,
    product_categories,
    read_price_features,
    read_prices,
)
from retailsim_core.prices import PriceConfig, observed_prices
from retailsim_core.prices.cells import advance
from retailsim_core.prices.state import CellState
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import PRICES_TABLE, RAW_TABLE


def test_materialised_weeks_equal_the_dense_engine_and_reference(default_pipeline):
    wh = default_pipeline["warehouse"]
    weeks = wh.weeks(PRICES_TABLE)
    categories = product_categories(wh, weeks[-1])
    state, prev, stored, dense = CellState(PriceConfig()), PRICE_STATE_SCHEMA.to_frame(), 0, 0
    for week in price_weeks(wh, weeks, features=True):
        raw = wh.scan(RAW_TABLE, [week.week], schema=RAW_TRANSACTIONS_SCHEMA)
        want = advance(state, observed_prices(raw).collect(), week.week)  # the dense table
        assert_frame_equal(week.prices, want)
        features = price_features(want, categories, prev)  # joined on product and store
        assert_frame_equal(week.features.sort("product_id", "store_id"), features)
        prev = next_price_state(features)
        stored += wh.manifest(PRICES_TABLE, week.week)["rows"]
        dense += want.height
    assert stored < dense / 3  # what the warehouse keeps: the observed cells


def test_a_store_subset_and_one_frame_read_the_same_cells(default_pipeline):
    wh = default_pipeline["warehouse"]
    weeks = [80, 81, 95]
    stores = read_prices(wh, [80])["store_id"].unique().sort().head(3).to_list()
    every = read_price_features(wh, weeks)
    some = read_price_features(wh, weeks, stores=stores)
    assert set(some["store_id"]) == set(stores)
    assert_frame_equal(some, every.filter(pl.col("store_id").is_in(stores)))
    prices = read_prices(wh, weeks, stores=stores)
    assert prices.select("product_id", "store_id", "week").equals(
        some.select("product_id", "store_id", "week")
    )


def test_a_reader_fails_clearly_on_a_missing_week(tmp_path, default_pipeline):
    wh = default_pipeline["warehouse"]
    copy = Warehouse(tmp_path / "wh")
    for week in (1, 2, 4):  # week 3 never materialized
        shutil.copytree(
            wh.partition_dir(PRICES_TABLE, week), copy.partition_dir(PRICES_TABLE, week)
        )
    with pytest.raises(FileNotFoundError, match="derived_prices week 3"):
        read_prices(copy, [4])
