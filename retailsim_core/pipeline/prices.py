"""``derived_prices``: weekly price tables built week by week from a small carried state.

Week W needs, besides its own raw rows, only what earlier weeks left behind: the cumulative
statistics and last three prices of each cell (partitions W-1..W-3) and the observed prices of
the reference lookback (partitions W-26..W-1). A run over weeks A..B loads that state from the warehouse once and
carries it forward in memory, so a backfill is one pass over the data and a weekly run reads a
few partitions, never the whole history. If the state is not in the warehouse (a range that
starts after unmaterialized weeks), it is rebuilt from raw_transactions without writing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import polars as pl

from retailsim_core.calendar import shop_week_of
from retailsim_core.lgsr import RAW_TRANSACTIONS_SCHEMA
from retailsim_core.pipeline.ingest import RAW_TABLE
from retailsim_core.prices import (
    BASE_WINDOW, OBSERVED_SCHEMA, VALIDATION_FLAGS, VALIDATION_FLAGS_DTYPE, PriceConfig, cell_keys, observed_prices, promotions,
    zone_key,
    cell_history_stats, validation, waterfall,
)
from retailsim_core.warehouse import Warehouse

PRICES_TABLE = "derived_prices"
CELL = ["cell", "product_num", "product_id", "store_id"]  # cell is the key; the rest ride along

PREV_PRICES = [f"prev_price_{k}" for k in range(1, BASE_WINDOW)]
CUMULATIVE_SCHEMA = pl.Schema({
    "cell": pl.Int64, "product_num": pl.Int32, "product_id": pl.String, "store_id": pl.String, "store_region": pl.String, "store_format": pl.String,
    "first_week": pl.Int16, "n_obs_to_date": pl.Int32, "price_sum_to_date": pl.Float64,
    "price_sumsq_to_date": pl.Float64,
    # The cell's price in each of the previous weeks (spec base price = max over w-3..w) and its
    # last base price, carried row-aligned so the base price is a row-wise max, not a group-by.
    **{c: pl.Float64 for c in PREV_PRICES}, "prev_base_price": pl.Float64,
})
DERIVED_PRICES_SCHEMA = pl.Schema({
    "product_id": pl.String, "store_id": pl.String, "store_region": pl.String, "store_format": pl.String,
    "week": pl.Int16, "shop_week": pl.Int32,
    "actual_price": pl.Float64, "base_price": pl.Float64, "reference_price": pl.Float64,
    "discount_depth": pl.Float64, "base_discount_depth": pl.Float64, "promo_flag": pl.Boolean,
    "imputation_method": pl.String, "quality_score": pl.Float64, "validation_flags": VALIDATION_FLAGS_DTYPE,
    "observed_price": pl.Float64, "n_lines": pl.UInt32, "units": pl.Int64,
    "first_week": pl.Int16, "n_obs_to_date": pl.Int32, "price_sum_to_date": pl.Float64,
    "price_sumsq_to_date": pl.Float64, "product_first_week": pl.Int16, "product_obs_weeks": pl.Int32,
    "missing_share": pl.Float64, "price_cv": pl.Float64, "prev_base_price": pl.Float64,
})
_PRODUCTS = pl.Schema({"product_num": pl.Int32, "product_first_week": pl.Int16, "product_obs_weeks": pl.Int32})


@dataclass
class PriceState:
    """What week W+1 needs from weeks <= W."""

    cumulative: pl.DataFrame   # CUMULATIVE_SCHEMA, one row per cell of the assortment to date
    history: pl.DataFrame      # OBSERVED_SCHEMA rows of the last `history_weeks` weeks
    products: pl.DataFrame     # _PRODUCTS: chain-wide weeks observed per product

    @classmethod
    def empty(cls) -> PriceState:
        return cls(CUMULATIVE_SCHEMA.to_frame(), OBSERVED_SCHEMA.to_frame(), _PRODUCTS.to_frame())


def _accumulate(cumulative: pl.DataFrame, observed: pl.DataFrame, week: int) -> pl.DataFrame:
    obs = observed.select(*CELL, pl.col("store_region").alias("r"), pl.col("store_format").alias("f"), "observed_price")
    p, seen = pl.col("observed_price"), pl.col("observed_price").is_not_null()
    return (
        cumulative.join(obs, on=CELL, how="full", coalesce=True)
        .select(*CELL, pl.coalesce("r", "store_region").alias("store_region"),
                pl.coalesce("f", "store_format").alias("store_format"),
                pl.coalesce("first_week", pl.lit(week)).cast(pl.Int16).alias("first_week"),
                (pl.col("n_obs_to_date").fill_null(0) + seen.cast(pl.Int32)).alias("n_obs_to_date"),
                (pl.col("price_sum_to_date").fill_null(0.0) + p.fill_null(0.0)).alias("price_sum_to_date"),
                (pl.col("price_sumsq_to_date").fill_null(0.0) + (p * p).fill_null(0.0)).alias("price_sumsq_to_date"),
                *PREV_PRICES, "prev_base_price")
        .sort("cell")  # a stable cell order makes every partition byte-identical on re-runs
    )


def derive_week(state: PriceState, observed: pl.DataFrame, week: int,
                cfg: PriceConfig) -> tuple[pl.DataFrame, PriceState]:
    """Week W's derived prices from its observed prices and the state left by weeks < W."""
    cumulative = _accumulate(state.cumulative, observed, week)
    seen = observed.select("product_num").unique().with_columns(
        product_first_week=pl.lit(week, pl.Int16), product_obs_weeks=pl.lit(1, pl.Int32))
    products = (pl.concat([state.products, seen]).group_by("product_num")
                .agg(pl.col("product_first_week").min(), pl.col("product_obs_weeks").sum()).sort("product_num"))
    history = pl.concat([state.history.filter(pl.col("week") > week - cfg.history_weeks), observed])
    own, zone = cell_history_stats(history.lazy(), week, cfg)
    priced = waterfall(cumulative.lazy(), observed.lazy(), own)
    table = (
        priced.with_columns(base_price=pl.max_horizontal("actual_price", *PREV_PRICES))
        .with_columns(zone_key())
        .join(zone, on="zone", how="left")
        .join(products.lazy(), on="product_num", how="left")
        .pipe(promotions, cfg)
        .pipe(validation, week, cfg)
        .with_columns(week=pl.lit(week, pl.Int16), shop_week=pl.lit(shop_week_of(week), pl.Int32))
        .sort("cell")
        .collect()
    )
    shifted = {"prev_price_1": pl.col("actual_price"), "prev_base_price": pl.col("base_price"),
               **{PREV_PRICES[k]: pl.col(PREV_PRICES[k - 1]) for k in range(1, len(PREV_PRICES))}}
    new_state = PriceState(
        cumulative=table.with_columns(**shifted).select(CUMULATIVE_SCHEMA.names()),
        history=history,
        products=products,
    )
    return table.select(DERIVED_PRICES_SCHEMA.names()).cast(dict(DERIVED_PRICES_SCHEMA)), new_state


def _observed_week(warehouse: Warehouse, week: int) -> pl.DataFrame:
    warehouse.require_weeks(RAW_TABLE, [week])
    raw = warehouse.scan(RAW_TABLE, [week], schema=RAW_TRANSACTIONS_SCHEMA).select(
        "product_id", "store_id", "store_region", "store_format", "week", "spend", "quantity")
    return observed_prices(raw).collect().sort("cell")


def state_from_warehouse(warehouse: Warehouse, week: int, cfg: PriceConfig) -> PriceState | None:
    """The state left by weeks < ``week``, from derived_prices partitions; None if absent."""
    if week == 1:
        return PriceState.empty()
    if warehouse.manifest(PRICES_TABLE, week - 1) is None:
        return None
    first = max(1, week - cfg.history_weeks)
    past = warehouse.scan(PRICES_TABLE, range(first, week), schema=DERIVED_PRICES_SCHEMA).with_columns(cell_keys())
    last = past.filter(pl.col("week") == week - 1).collect()
    history = (past.filter(pl.col("imputation_method") == "observed")
               .select(OBSERVED_SCHEMA.names()).cast(dict(OBSERVED_SCHEMA)).collect())
    cumulative = last.with_columns(prev_price_1=pl.col("actual_price"), prev_base_price=pl.col("base_price"))
    for k in range(2, BASE_WINDOW):  # the prices of weeks W-2, W-3 of the cells that existed then
        earlier = past.filter(pl.col("week") == week - k).select("cell", pl.col("actual_price").alias(f"prev_price_{k}"))
        cumulative = cumulative.join(earlier.collect(), on="cell", how="left")
    return PriceState(
        cumulative=cumulative.select(CUMULATIVE_SCHEMA.names()).cast(dict(CUMULATIVE_SCHEMA)).sort("cell"),
        history=history.sort("week", "cell"),
        products=last.select(_PRODUCTS.names()).unique("product_num").sort("product_num"),
    )


def derive_price_weeks(warehouse: Warehouse, weeks: Iterable[int], cfg: PriceConfig = PriceConfig(),
                       log: Callable[[str], None] = lambda _: None) -> pl.DataFrame:
    """Write derived_prices for ``weeks`` (ascending, contiguous); returns a per-week summary."""
    weeks = sorted(weeks)
    state = state_from_warehouse(warehouse, weeks[0], cfg)
    if state is None:  # rebuild the state from raw data, writing nothing
        log(f"derived_prices: no partition for week {weeks[0] - 1}; rebuilding state from week 1")
        state = PriceState.empty()
        for week in range(1, weeks[0]):
            _, state = derive_week(state, _observed_week(warehouse, week), week, cfg)
    summaries = []
    for i, week in enumerate(weeks, 1):
        observed = _observed_week(warehouse, week)
        table, state = derive_week(state, observed, week, cfg)
        raw_manifest = warehouse.manifest(RAW_TABLE, week) or {}
        warehouse.write_partition(PRICES_TABLE, week, table, DERIVED_PRICES_SCHEMA,
                                  {"source_status": raw_manifest.get("status", "absent")})
        summaries.append(summarise(table).with_columns(week=pl.lit(week, pl.Int16)))
        log(f"[{i}/{len(weeks)}] derived_prices week {week}: {table.height:,} cells, "
            f"{observed.height:,} observed")
    return pl.concat(summaries, how="vertical_relaxed")


def summarise(table: pl.DataFrame) -> pl.DataFrame:
    """One row of counts per week, for asset metadata and checks."""
    flags = table.get_column("validation_flags").struct.unnest()
    counts = {f"flag_{name}": int(flags.get_column(name).sum()) for name in VALIDATION_FLAGS}
    return pl.DataFrame([{
        "cells": table.height, "observed": int((table["imputation_method"] == "observed").sum()),
        "promo_cells": int(table["promo_flag"].sum()), "max_depth": float(table["discount_depth"].max() or 0.0),
        "min_price": float(table["actual_price"].min() or 0.0), "max_price": float(table["actual_price"].max() or 0.0),
        **counts,
    }])


@dataclass(frozen=True)
class RuleResult:
    rule: str
    observed: float      # what was measured (a count or a share)
    threshold: float     # the largest acceptable value
    cells: int           # cells the share is taken over

    @property
    def passed(self) -> bool:
        return self.observed <= self.threshold


# (rule, measured as, tolerated value): prices must be positive without exception; the other
# rules tolerate what real shelves do (a few large discounts, base prices that drift down after
# a price cut, rarely sold products, volatile categories).
PRICE_RULE_TOLERANCES = {
    "price_nonpositive": 0.0, "price_over_max": 0.0, "depth_over_max": 0.001,
    "base_price_decrease": 0.10, "low_coverage": 0.5, "high_volatility": 0.05,
}


def price_rule_report(warehouse: Warehouse, weeks: Iterable[int] | None = None) -> list[RuleResult]:
    """Share of cells breaking each business rule over the given (default: all) weeks."""
    lf = warehouse.scan(PRICES_TABLE, weeks, schema=DERIVED_PRICES_SCHEMA)
    counts = lf.select(pl.len().alias("cells"), *[pl.col("validation_flags").struct.field(n).sum().alias(n)
                                                   for n in VALIDATION_FLAGS]).collect().row(0, named=True)
    cells = int(counts["cells"])
    return [RuleResult(rule, counts[rule] / max(cells, 1), tol, cells) for rule, tol in PRICE_RULE_TOLERANCES.items()]
