"""``derived_prices``: weekly price tables built week by week from a carried state (D49).

Week W needs, besides its own raw rows, only what earlier weeks left behind: the running
statistics of each cell and the observed prices of the reference lookback. A run over weeks
A..B restores that state from partitions A-H..A-1 once (H = ``PriceConfig.history_weeks``) and
carries it forward in memory, so a backfill is one pass over the data and a weekly run reads a
few partitions, never the whole history. If they are not all in the warehouse, the state is
rebuilt from raw_transactions without writing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import polars as pl

from retailsim_core.graph.substitution import PROMOTION_CELLS_SCHEMA
from retailsim_core.ingest.lgsr import RAW_TRANSACTIONS_SCHEMA
from retailsim_core.prices import (
    DERIVED_PRICES_SCHEMA,
    VALIDATION_FLAGS,
    PriceConfig,
    flag,
    observed_prices,
)
from retailsim_core.prices.cells import advance, restore
from retailsim_core.prices.state import CellState
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import PRICES_TABLE, RAW_TABLE

# D67: zstd at level 1 writes as fast as LZ4 and a third smaller (D49 had measured zstd at its
# default level 3, ~45% slower).
PRICES_COMPRESSION, PRICES_COMPRESSION_LEVEL = "zstd", 1
_STATE_COLUMNS = ("product_id", "store_id", "actual_price", "observed_price")


def _observed_week(warehouse: Warehouse, week: int) -> pl.DataFrame:
    warehouse.require_weeks(RAW_TABLE, [week])
    raw = warehouse.scan(RAW_TABLE, [week], schema=RAW_TRANSACTIONS_SCHEMA).select(
        "store_id",
        "store_region",
        "store_format",
        "product_id",
        "week",
        "spend",
        "regular_spend",
        "quantity",
    )
    return observed_prices(raw).collect()


def state_from_warehouse(warehouse: Warehouse, week: int, cfg: PriceConfig) -> CellState | None:
    """The state left by weeks < ``week``, from derived_prices partitions; None if absent."""
    if week == 1:
        return CellState(cfg)
    weeks = range(max(1, week - cfg.history_weeks), week)
    if any(warehouse.manifest(PRICES_TABLE, w) is None for w in weeks):
        return None
    frames = {
        w: warehouse.scan(PRICES_TABLE, [w], schema=DERIVED_PRICES_SCHEMA)
        .select(pl.all() if w == week - 1 else pl.col(_STATE_COLUMNS))
        .collect()
        for w in weeks
    }
    return restore(cfg, frames)


def derive_price_weeks(
    warehouse: Warehouse,
    weeks: Iterable[int],
    cfg: PriceConfig = PriceConfig(),
    log: Callable[[str], None] = lambda _: None,
) -> pl.DataFrame:
    """Write derived_prices for ``weeks`` (ascending, contiguous); returns a per-week summary."""
    weeks = sorted(weeks)
    state = state_from_warehouse(warehouse, weeks[0], cfg)
    if state is None:  # rebuild the state from raw data, writing nothing
        log(
            f"derived_prices: partitions before week {weeks[0]} incomplete; rebuilding state from "
            "week 1"
        )
        state = CellState(cfg)
        for week in range(1, weeks[0]):
            advance(state, _observed_week(warehouse, week), week)
    # Three stages overlap: the next week's observed prices (Polars) and the previous week's
    # write run in threads while the array engine folds in this week (NumPy, one core). At
    # most one table waits to be written, so memory stays at two weeks' tables.
    summaries, pending = [], None
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix=PRICES_TABLE) as pool:
        next_observed = pool.submit(_observed_week, warehouse, weeks[0])
        for i, week in enumerate(weeks):
            observed = next_observed.result()
            if i + 1 < len(weeks):
                next_observed = pool.submit(_observed_week, warehouse, weeks[i + 1])
            table = advance(state, observed, week)
            if pending is not None:
                pending.result()  # surfaces a failed write before going on
            pending = pool.submit(_write_week, warehouse, week, table)
            summaries.append(summarise(table).with_columns(week=pl.lit(week, pl.Int16)))
            log(
                f"[{i + 1}/{len(weeks)}] derived_prices week {week}: {table.height:,} cells, "
                f"{observed.height:,} observed"
            )
        pending.result()
    return pl.concat(summaries, how="vertical_relaxed")


def _write_week(warehouse: Warehouse, week: int, table: pl.DataFrame) -> None:
    raw_manifest = warehouse.manifest(RAW_TABLE, week) or {}
    warehouse.write_partition(
        PRICES_TABLE,
        week,
        table,
        DERIVED_PRICES_SCHEMA,
        {"source_status": raw_manifest.get("status", "absent")},
        compression=PRICES_COMPRESSION,
        compression_level=PRICES_COMPRESSION_LEVEL,
    )


def summarise(table: pl.DataFrame) -> pl.DataFrame:
    """One row of counts per week, for asset metadata and checks."""
    flags = table.select(flag(name).sum().alias(name) for name in VALIDATION_FLAGS).row(
        0, named=True
    )
    counts = {f"flag_{name}": int(flags[name]) for name in VALIDATION_FLAGS}
    return pl.DataFrame(
        [
            {
                "cells": table.height,
                "observed": int((table["imputation_method"] == "observed").sum()),
                "promo_cells": int(table["promo_flag"].sum()),
                "max_depth": float(table["discount_depth"].max() or 0.0),
                "min_price": float(table["actual_price"].min() or 0.0),
                "max_price": float(table["actual_price"].max() or 0.0),
                **counts,
            }
        ]
    )


@dataclass(frozen=True)
class RuleResult:
    rule: str
    observed: float  # what was measured (a count or a share)
    threshold: float  # the largest acceptable value
    cells: int  # cells the share is taken over

    @property
    def passed(self) -> bool:
        return self.observed <= self.threshold


# (rule, measured as, tolerated value): prices must be positive without exception; the other
# rules tolerate what real shelves do (a few large discounts, base prices that drift down after
# a price cut, rarely sold products, volatile categories).
PRICE_RULE_TOLERANCES = {
    "price_nonpositive": 0.0,
    "price_over_max": 0.0,
    "depth_over_max": 0.001,
    "base_price_decrease": 0.10,
    "low_coverage": 0.5,
    "high_volatility": 0.05,
}


def price_rule_report(warehouse: Warehouse, weeks: Iterable[int] | None = None) -> list[RuleResult]:
    """Share of cells breaking each business rule over the given (default: all) weeks."""
    lf = warehouse.scan(PRICES_TABLE, weeks, schema=DERIVED_PRICES_SCHEMA)
    counts = (
        lf.select(pl.len().alias("cells"), *[flag(n).sum() for n in VALIDATION_FLAGS])
        .collect()
        .row(0, named=True)
    )
    cells = int(counts["cells"])
    return [
        RuleResult(rule, counts[rule] / max(cells, 1), tol, cells)
        for rule, tol in PRICE_RULE_TOLERANCES.items()
    ]


def promotion_cells(warehouse: Warehouse, weeks: list[int]) -> pl.LazyFrame:
    """derived_prices cells of ``weeks`` as the promotion tests read them
    (``substitution.PROMOTION_CELLS_SCHEMA``): promotion flag, observed or imputed, units, depth."""
    return (
        warehouse.scan(PRICES_TABLE, weeks, schema=DERIVED_PRICES_SCHEMA)
        .select(
            "product_id",
            "store_id",
            "week",
            pl.col("promo_flag").fill_null(False).alias("promo"),
            (pl.col("imputation_method") == "observed").alias("observed"),
            pl.col("units").fill_null(0).cast(pl.Int64),
            "discount_depth",
        )
        .cast(dict(PROMOTION_CELLS_SCHEMA))
    )
