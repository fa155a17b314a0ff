"""The one shelf reader (D96): every week it materialises from the stored observed rows is the
dense engine's table cell for cell, and its price features are the joined reference's, exactly.
Each check runs on the tiny warehouse (the quick path) and on the default data (slow)."""

import shutil

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from retailsim_core.derived_prices import PriceConfig, observed_prices
from retailsim_core.derived_prices.cells import advance
from retailsim_core.derived_prices.state import CellState
from retailsim_core.features.feature_tables import (
    PRICE_STATE_SCHEMA,
    next_price_state,
    price_features,
)
from retailsim_core.ingest.lgsr import RAW_TRANSACTIONS_SCHEMA
from retailsim_core.pipeline.readers.price_reader import (
    price_weeks,
    product_categories,
    read_price_features,
    read_prices,
    store_regions,
    stored_prices,
)
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import PRICES_TABLE, RAW_TABLE


@pytest.fixture(params=["tiny", pytest.param("default", marks=pytest.mark.slow)])
def priced(request) -> Warehouse:
    """A warehouse with derived prices: the tiny one (weeks 1-14, week 4 missing) or the
    default data's 117 weeks."""
    if request.param == "tiny":
        return request.getfixturevalue("tiny_warehouse")["warehouse"]
    return request.getfixturevalue("default_pipeline")["warehouse"]


def test_materialised_weeks_equal_the_dense_engine_and_reference(priced):
    wh = priced
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
    assert stored < dense / 2  # what the warehouse keeps: the observed cells


def test_a_store_subset_and_one_frame_read_the_same_cells(priced):
    wh = priced
    weeks = wh.weeks(PRICES_TABLE)[-3:]
    stores = read_prices(wh, weeks[:1])["store_id"].unique().sort().head(3).to_list()
    every = read_price_features(wh, weeks)
    some = read_price_features(wh, weeks, stores=stores)
    assert set(some["store_id"]) == set(stores)
    assert_frame_equal(some, every.filter(pl.col("store_id").is_in(stores)))
    pairs = pl.DataFrame({"store_id": [stores[0], stores[1], stores[0]], "week": weeks})
    paired = read_price_features(
        wh, weeks, stores=stores, columns=("store_id", "week"), pairs=pairs
    )
    keep = {(stores[0], weeks[0]), (stores[1], weeks[1]), (stores[0], weeks[2])}
    inside = [(s, w) in keep for s, w in every.select("store_id", "week").iter_rows()]
    want = every.filter(pl.Series(inside)).select("store_id", "week")
    assert want.height and paired.equals(want)  # those store-weeks only, in the frame's order
    prices = read_prices(wh, weeks, stores=stores)
    assert prices.select("product_id", "store_id", "week").equals(
        some.select("product_id", "store_id", "week")
    )


def test_a_reader_fails_clearly_on_a_missing_week(tmp_path, tiny_warehouse):
    wh = tiny_warehouse["warehouse"]
    copy = Warehouse(tmp_path / "wh")
    *kept, gone, last = wh.weeks(PRICES_TABLE)[:4]
    for week in (*kept, last):  # ``gone`` never materialized
        shutil.copytree(
            wh.partition_dir(PRICES_TABLE, week), copy.partition_dir(PRICES_TABLE, week)
        )
    with pytest.raises(FileNotFoundError, match=f"derived_prices week {gone}"):
        read_prices(copy, [last])


def _one_pass_categories(wh: Warehouse, through: int) -> pl.DataFrame:
    """The reference: one scan of every raw row, each product's first row in week order."""
    weeks = [w for w in wh.weeks(RAW_TABLE) if w <= through]
    return (
        wh.scan(RAW_TABLE, weeks, schema=RAW_TRANSACTIONS_SCHEMA)
        .select("product_id", "prod_code_10")
        .unique("product_id", keep="first", maintain_order=True)
        .collect()
    )


def test_product_categories_week_by_week_equal_one_pass(priced):
    wh = priced
    for through in (1, wh.weeks(RAW_TABLE)[len(wh.weeks(RAW_TABLE)) // 3], wh.weeks(RAW_TABLE)[-1]):
        assert_frame_equal(product_categories(wh, through), _one_pass_categories(wh, through))


def test_product_categories_keep_a_products_first_row_across_weeks(tmp_path):
    """A product re-coded later keeps its first week's code; new products follow in order."""
    wh = Warehouse(tmp_path / "wh")
    rows = {1: [("P2", "A"), ("P1", "B"), ("P2", "Z")], 2: [("P3", "C"), ("P1", "Y")], 3: []}
    for week, pairs in rows.items():
        frame = (
            RAW_TRANSACTIONS_SCHEMA.to_frame()
            .clear(len(pairs))
            .with_columns(
                product_id=pl.Series([p for p, _ in pairs], dtype=pl.String),
                prod_code_10=pl.Series([c for _, c in pairs], dtype=pl.String),
                week=pl.lit(week, dtype=RAW_TRANSACTIONS_SCHEMA["week"]),
            )
        )
        wh.write_partition(RAW_TABLE, week, frame, RAW_TRANSACTIONS_SCHEMA)
    got = product_categories(wh, 3)
    assert got.rows() == [("P2", "A"), ("P1", "B"), ("P3", "C")]
    assert_frame_equal(got, _one_pass_categories(wh, 3))
    assert product_categories(wh, 1).rows() == [("P2", "A"), ("P1", "B")]


def test_store_regions_week_by_week_equal_one_pass(priced):
    wh = priced
    weeks = wh.weeks(PRICES_TABLE)[:40]
    want = (
        stored_prices(wh, weeks)
        .select("store_id", "store_region")
        .unique()
        .sort("store_id", "store_region")
        .collect()
    )
    assert want.height > 1
    assert_frame_equal(store_regions(wh, weeks), want)
    assert store_regions(wh, []).is_empty()
