"""Feature assets (design §3): pseudo_brands, price_features (weekly), store_features (weekly)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import polars as pl

from retailsim_core.features.brands import BrandConfig, product_price_stats, pseudo_brands
from retailsim_core.features.feature_tables import (
    PRICE_FEATURES_SCHEMA,
    PRICE_STATE_SCHEMA,
    STORE_FEATURES_SCHEMA,
    StoreState,
    advance_stores,
    next_price_state,
    price_features,
    store_features,
)
from retailsim_core.ingest.lgsr import RAW_TRANSACTIONS_SCHEMA
from retailsim_core.pipeline.graph_tables import load_graph
from retailsim_core.pipeline.price_weeks import DERIVED_PRICES_SCHEMA
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import (
    PRICE_FEATURES_TABLE,
    PRICES_TABLE,
    RAW_TABLE,
    STORE_FEATURES_TABLE,
)


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
    observed = (
        warehouse.scan(PRICES_TABLE, weeks, schema=DERIVED_PRICES_SCHEMA)
        .filter(pl.col("imputation_method") == "observed")
        .select("product_id", "week", "actual_price")
    )
    stats = product_price_stats(observed).collect()
    return pseudo_brands(products, stats, units, load_graph(warehouse).edges, cfg)


def _categories(warehouse: Warehouse, weeks: Iterable[int]) -> pl.DataFrame:
    return (
        warehouse.scan(RAW_TABLE, list(weeks), schema=RAW_TRANSACTIONS_SCHEMA)
        .select("product_id", "prod_code_10")
        .unique("product_id", keep="first")
        .collect()
    )


def price_feature_weeks(
    warehouse: Warehouse, weeks: Iterable[int], log: Callable[[str], None] = lambda _: None
) -> pl.DataFrame:
    """Write price_features for ``weeks``; the previous week's features are the only state."""
    weeks = sorted(weeks)
    start = weeks[0]
    cats = _categories(warehouse, range(1, start))
    if start == 1:
        prev = PRICE_STATE_SCHEMA.to_frame()
    elif warehouse.manifest(PRICE_FEATURES_TABLE, start - 1) is not None:
        prev = next_price_state(
            warehouse.scan(
                PRICE_FEATURES_TABLE, [start - 1], schema=PRICE_FEATURES_SCHEMA
            ).collect()
        )
    else:  # rebuild the carried columns from week 1, writing nothing
        log(f"price_features: no partition for week {start - 1}; rebuilding from week 1")
        prev, cats = PRICE_STATE_SCHEMA.to_frame(), _categories(warehouse, [])
        for week in range(1, start):
            cats = _add_categories(warehouse, cats, week)
            prev = next_price_state(_features_of_week(warehouse, week, prev, cats))
    rows = []
    for i, week in enumerate(weeks, 1):
        cats = _add_categories(warehouse, cats, week)
        table = _features_of_week(warehouse, week, prev, cats)
        warehouse.write_partition(PRICE_FEATURES_TABLE, week, table, PRICE_FEATURES_SCHEMA)
        prev = next_price_state(table)
        rows.append(
            {
                "week": week,
                "cells": table.height,
                "on_promotion": int(table["promo_flag"].sum()),
                "max_momentum": int(table["promo_momentum"].max() or 0),
            }
        )
        log(f"[{i}/{len(weeks)}] price_features week {week}: {table.height:,} cells")
    return pl.DataFrame(rows)


def _add_categories(warehouse: Warehouse, cats: pl.DataFrame, week: int) -> pl.DataFrame:
    return pl.concat([cats, _categories(warehouse, [week])]).unique("product_id", keep="first")


def _features_of_week(
    warehouse: Warehouse, week: int, prev: pl.DataFrame, cats: pl.DataFrame
) -> pl.DataFrame:
    warehouse.require_weeks(PRICES_TABLE, [week])
    prices = (
        warehouse.scan(PRICES_TABLE, [week], schema=DERIVED_PRICES_SCHEMA)
        .select(
            "product_id",
            "store_id",
            "week",
            "shop_week",
            "actual_price",
            "discount_depth",
            "promo_flag",
        )
        .collect()
    )
    return price_features(prices, cats, prev)


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
