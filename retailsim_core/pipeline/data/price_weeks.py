"""``derived_prices``: weekly price tables built week by week from a carried state (D49, D96).

Week W needs, besides its own raw rows, only the state earlier weeks left behind. A partition
stores the week's observed cells (D96: the dense table of any week is materialised on read by
``price_reader``), so a run over weeks A..B rebuilds the state by replaying the stored rows of
weeks 1..A-1 (a few vectorised passes a week, no table built) and carries it forward in memory.
If they are not all in the warehouse, the state is rebuilt from raw_transactions without
writing. Each partition's manifest keeps the dense week's counts (cells, flags), so the
business-rule checks never materialise the dense table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import polars as pl

from retailsim_core.response.promotion_events import regional_promotions
from retailsim_core.graph.substitution import PROMOTION_CELLS_SCHEMA
from retailsim_core.ingest.lgsr import RAW_TRANSACTIONS_SCHEMA
from retailsim_core.pipeline.readers.price_reader import price_weeks, stored_prices
from retailsim_core.derived_prices import (
    DERIVED_PRICES_SCHEMA,
    VALIDATION_FLAGS,
    PriceConfig,
    flag,
    observed_prices,
)
from retailsim_core.derived_prices.carried import replay_state
from retailsim_core.derived_prices.cells import advance, advance_observed
from retailsim_core.derived_prices.state import CellState
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import PRICES_TABLE, RAW_TABLE

# D67: zstd at level 1 writes as fast as LZ4 and a third smaller (D49 had measured zstd at its
# default level 3, ~45% slower).
PRICES_COMPRESSION, PRICES_COMPRESSION_LEVEL = "zstd", 1


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
    """The state left by weeks < ``week``, replayed from derived_prices partitions; None if one
    is absent."""
    if any(warehouse.manifest(PRICES_TABLE, w) is None for w in range(1, week)):
        return None
    return replay_state(lambda w: stored_prices(warehouse, [w]).collect(), week - 1, cfg)


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
            stored, dense = advance_observed(state, observed, week)
            if pending is not None:
                pending.result()  # surfaces a failed write before going on
            summary = summarise(dense)
            pending = pool.submit(_write_week, warehouse, week, stored, summary)
            summaries.append(summary.with_columns(week=pl.lit(week, pl.Int16)))
            log(
                f"[{i + 1}/{len(weeks)}] derived_prices week {week}: {dense.height:,} cells, "
                f"{observed.height:,} observed"
            )
        pending.result()
    return pl.concat(summaries, how="vertical_relaxed")


def _write_week(
    warehouse: Warehouse, week: int, stored: pl.DataFrame, summary: pl.DataFrame
) -> None:
    raw_manifest = warehouse.manifest(RAW_TABLE, week) or {}
    warehouse.write_partition(
        PRICES_TABLE,
        week,
        stored,
        DERIVED_PRICES_SCHEMA,
        {
            "source_status": raw_manifest.get("status", "absent"),
            "dense": summary.row(0, named=True),
        },
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
    """Share of cells breaking each business rule over the given (default: all) weeks, from the
    dense weeks' counts each partition's manifest keeps."""
    weeks = warehouse.weeks(PRICES_TABLE) if weeks is None else list(weeks)
    dense = [warehouse.manifest(PRICES_TABLE, w)["dense"] for w in weeks]
    cells = sum(int(d["cells"]) for d in dense)
    return [
        RuleResult(rule, sum(int(d[f"flag_{rule}"]) for d in dense) / max(cells, 1), tol, cells)
        for rule, tol in PRICE_RULE_TOLERANCES.items()
    ]


def promotion_cells(
    warehouse: Warehouse,
    weeks: list[int],
    promoted_products: bool = False,
    products: pl.Series | None = None,
) -> pl.LazyFrame:
    """Dense derived_prices cells of ``weeks`` as the promotion tests read them
    (``substitution.PROMOTION_CELLS_SCHEMA``): promotion flag, observed or imputed, units, depth;
    materialised week by week (``price_reader``), only these columns kept. ``promoted_products``
    keeps only the products some store observed on promotion that week: all that
    ``regional_promotions`` reads, a small share of the cells; ``products`` only those."""
    keep = None if products is None else products.unique().implode()
    frames = [
        _promotion_cells(week.prices, promoted_products, keep)
        for week in price_weeks(warehouse, weeks)
    ]
    return (pl.concat(frames) if frames else PROMOTION_CELLS_SCHEMA.to_frame()).lazy()


def regional_cuts(warehouse: Warehouse, weeks: list[int], stores: pl.DataFrame) -> pl.DataFrame:
    """``regional_promotions`` of ``weeks`` computed a week at a time: a week's cuts read that
    week's cells alone, so memory holds one week's promoted cells, not all of them (D97)."""
    frames = [
        regional_promotions(_promotion_cells(week.prices, True, None).lazy(), stores).collect()
        for week in price_weeks(warehouse, weeks)
    ]
    return (
        pl.concat(frames)
        if frames
        else regional_promotions(PROMOTION_CELLS_SCHEMA.to_frame().lazy(), stores).collect()
    )


def _promotion_cells(prices: pl.DataFrame, promoted_products: bool, keep) -> pl.DataFrame:
    cells = prices.select(
        "product_id",
        "store_id",
        "week",
        pl.col("promo_flag").fill_null(False).alias("promo"),
        (pl.col("imputation_method") == "observed").alias("observed"),
        pl.col("units").fill_null(0).cast(pl.Int64),
        "discount_depth",
    ).cast(dict(PROMOTION_CELLS_SCHEMA))
    if keep is not None:
        cells = cells.filter(pl.col("product_id").is_in(keep))
    if promoted_products:
        promoted = cells.filter(pl.col("promo") & pl.col("observed"))["product_id"]
        cells = cells.filter(pl.col("product_id").is_in(promoted.unique().implode()))
    return cells
