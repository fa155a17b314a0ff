"""Feature assets (design §3): pseudo_brands and store_features (weekly). Price features are
materialised on read with the dense shelf (``price_reader``, D96)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import polars as pl

from retailsim_core.features.brands import BrandConfig, product_price_stats, pseudo_brands
from retailsim_core.features.feature_tables import (
    STORE_FEATURES_SCHEMA,
    StoreState,
    advance_stores,
    store_features,
)
from retailsim_core.ingest.lgsr import RAW_TRANSACTIONS_SCHEMA
from retailsim_core.pipeline.data.graph_tables import load_graph
from retailsim_core.pipeline.readers.price_reader import stored_prices
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import RAW_TABLE, STORE_FEATURES_TABLE


def build_pseudo_brands(
    warehouse: Warehouse, split: TemporalSplit, cfg: BrandConfig = BrandConfig()
) -> pl.DataFrame:
    weeks = split.train_weeks
    raw = warehouse.scan(RAW_TABLE, weeks, schema=RAW_TRANSACTIONS_SCHEMA)
    products = raw.select("product_id", "prod_code_10").unique("product_id", keep="first").collect()
    units = (
        raw.group_by("product_id")
        .agg(pl.col("quantity").sum().cast(pl.Int64).alias("units"))
        .collect()
    )
    observed = stored_prices(warehouse, weeks).select("product_id", "week", "actual_price")
    stats = product_price_stats(observed).collect()
    return pseudo_brands(products, stats, units, load_graph(warehouse).edges, cfg)


def store_feature_weeks(
    warehouse: Warehouse, weeks: Iterable[int], log: Callable[[str], None] = lambda _: None
) -> pl.DataFrame:
    """Write store_features for ``weeks``: week W from weeks < W only."""
    weeks = sorted(weeks)
    cols = ["store_id", "store_format", "store_region", "basket_id", "product_id"]

    def read(ws):
        return (
            warehouse.scan(RAW_TABLE, list(ws), schema=RAW_TRANSACTIONS_SCHEMA)
            .select("week", *cols)
            .collect()
        )

    state = StoreState.empty()
    if weeks[0] > 1:
        for (week,), part in sorted(
            read(range(1, weeks[0])).partition_by("week", as_dict=True).items()
        ):
            state = advance_stores(state, part, week)
    rows = []
    for week in weeks:
        table = store_features(state, week)
        warehouse.write_partition(STORE_FEATURES_TABLE, week, table, STORE_FEATURES_SCHEMA)
        state = advance_stores(state, read([week]), week)
        rows.append({"week": week, "stores": int((~table["is_new_store"]).sum())})
    log(f"store_features: {len(weeks)} weeks")
    return pl.DataFrame(rows)
