"""``demand_forecast``: the demand forecast check over the warehouse's test weeks (issue #61).

Reads ``raw_transactions`` and the promotion plan, writes ``demand_forecast.parquet`` (each
test cell-week: product, store, week, promotion kind, observed units and each method's
forecast), ``quantity_forecast.parquet`` (each test line's units and their forecasts) and
``scores.json`` (WAPE, bias, MASE, RMSE, chain WAPE with product-resample intervals, over all
and over promoted cell-weeks; the Poisson fixed-effects coefficients; the quantity check).
"""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl

from retailsim_core.demand.check import (
    DemandConfig,
    forecast_frame,
    library_frame,
    score,
    with_library_forecasts,
)
from retailsim_core.demand.quantity import line_frame, quantity_forecasts, quantity_scores
from retailsim_core.ingest.promotion_plan import SOURCE_PROMOTIONS_SCHEMA
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.io import atomic_write_parquet
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import PROMOTION_CELLS_TABLE, RAW_TABLE
from retailsim_core.training.checkpoint import write_json


def run_demand_check(
    warehouse: Warehouse,
    split: TemporalSplit,
    folder: Path,
    n_boot: int = 500,
    seed: int = 0,
    cfg: DemandConfig | None = None,
) -> dict:
    """Forecast every test week of every cell that sold before them; write and return the
    scores (``seconds`` included)."""
    start = time.perf_counter()
    cfg = cfg or DemandConfig()
    first, last = split.valid_end + 1, max(warehouse.weeks(RAW_TABLE))
    raw = warehouse.scan(RAW_TABLE).select(
        "product_id", "store_id", "week", "quantity", "spend", "regular_spend"
    )
    plan = warehouse.scan(PROMOTION_CELLS_TABLE, schema=SOURCE_PROMOTIONS_SCHEMA)
    frame = forecast_frame(raw, plan, first_forecast_week=first, last_week=last).collect()
    fits = {}
    if cfg.libraries:
        library = library_frame(
            raw, plan, warehouse.calendar, first_forecast_week=first, last_week=last, cfg=cfg
        ).collect()
        frame, fits = with_library_forecasts(frame, library, first_forecast_week=first, cfg=cfg)
        del library
    scores = score(frame, first_forecast_week=first, n_boot=n_boot, seed=seed) | fits
    lines = line_frame(raw, plan, first_forecast_week=first).collect()
    quantities, quantity_fit = quantity_forecasts(
        lines, first_forecast_week=first, cfg=cfg.quantity
    )
    scores["quantity"] = quantity_scores(quantities, n_boot=n_boot, seed=seed) | quantity_fit
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_parquet(frame.filter(pl.col("week") >= first), folder / "demand_forecast.parquet")
    atomic_write_parquet(quantities, folder / "quantity_forecast.parquet")
    scores |= {"test_weeks": [first, last], "seconds": round(time.perf_counter() - start, 1)}
    write_json(folder / "scores.json", scores)
    return scores
