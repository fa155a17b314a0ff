"""``demand_forecast``: the demand forecast check over the warehouse's test weeks (issue #61).

Reads ``raw_transactions`` and the promotion plan, writes ``demand_forecast.parquet`` (each
test cell-week: product, store, week, promotion kind, observed units and each method's
forecast), ``quantity_forecast.parquet`` (each test line's units and their forecasts) and
``scores.json`` (WAPE, bias, MASE, RMSE, chain WAPE with product-resample intervals, over all
and over promoted cell-weeks; the Poisson fixed-effects coefficients; the quantity check and,
on synthetic data, the planted stock-up's recovery).
"""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl

from retailsim_core.demand.cells.check import (
    FRAME_COLUMNS,
    DemandConfig,
    ScoreSums,
    cell_chunks,
    fit_libraries,
    forecast_frame,
    library_frame,
    sample_cells,
    with_library_forecasts,
)
from retailsim_core.demand.cells.unit_panel import KEY, weekly_units
from retailsim_core.demand.response_recovery import lift_recovery, planted_quantity_lift
from retailsim_core.demand.world.quantity import line_frame, quantity_forecasts, quantity_scores
from retailsim_core.ingest.promotion_plan import SOURCE_PROMOTIONS_SCHEMA
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.io import atomic_write_parquet
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import PROMOTION_CELLS_TABLE, RAW_TABLE
from retailsim_core.training.checkpoints.checkpoint import write_json


def run_demand_check(
    warehouse: Warehouse,
    split: TemporalSplit,
    folder: Path,
    n_boot: int = 500,
    seed: int = 0,
    cfg: DemandConfig | None = None,
    world=None,
) -> dict:
    """Forecast every test week of every cell that sold before them, a chunk of products at a
    time; write and return the scores (``seconds`` included). ``world``: the planted world the
    data was generated from, whose stock-up the quantity model's is scored against (None: real
    data)."""
    start = time.perf_counter()
    cfg = cfg or DemandConfig()
    first, last = split.valid_end + 1, max(warehouse.weeks(RAW_TABLE))
    raw = warehouse.scan(RAW_TABLE).select(
        "product_id", "store_id", "week", "quantity", "spend", "regular_spend"
    )
    plan = warehouse.scan(PROMOTION_CELLS_TABLE, schema=SOURCE_PROMOTIONS_SCHEMA)
    kwargs = dict(first_forecast_week=first, last_week=last)
    units = weekly_units(raw)
    fitted = None
    if cfg.libraries:
        cells = sample_cells(units, first_forecast_week=first, n=cfg.fixed_effects.max_fit_cells,
                             seed=seed)  # fmt: skip
        sample = library_frame(raw, plan, warehouse.calendar, cfg=cfg, cells=cells.lazy(),
                               **kwargs).collect()  # fmt: skip
        fitted = fit_libraries(sample, first_forecast_week=first, cfg=cfg)
        del sample
    chunks = cell_chunks(units, first_forecast_week=first, max_cells=cfg.max_chunk_cells).collect()
    tests, sums = [], None
    for chunk in chunks.partition_by("chunk", maintain_order=True):
        part = raw.join(chunk.lazy().select("product_id"), on="product_id", how="semi")
        frame = forecast_frame(part, plan, **kwargs).collect()
        test = frame.filter(pl.col("week") >= first)
        if fitted is not None:
            library = library_frame(part, plan, warehouse.calendar, cfg=cfg, **kwargs).collect()
            test = with_library_forecasts(test, library, fitted, first_forecast_week=first,
                                          cfg=cfg)  # fmt: skip
            del library
        sums = sums or ScoreSums([c for c in test.columns if c not in FRAME_COLUMNS])
        sums.add(frame.filter(pl.col("week") < first), test)
        tests.append(test)
        del frame
    scores = sums.scores(n_boot=n_boot, seed=seed) | {"chunks": chunks["chunk"].n_unique()}
    if fitted is not None:
        scores |= {"poisson_fe": fitted.fixed_effects, "seconds_by": fitted.seconds}
    lines = line_frame(raw, plan, first_forecast_week=first).collect()
    quantities, quantity_fit = quantity_forecasts(
        lines, first_forecast_week=first, cfg=cfg.quantity
    )
    scores["quantity"] = quantity_scores(quantities, n_boot=n_boot, seed=seed) | quantity_fit
    if world is not None:  # the planted stock-up response (D132)
        lifts = planted_quantity_lift(world, quantities)
        scores["planted_quantity"] = lift_recovery(lifts, "product_id", n_boot=n_boot, seed=seed)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_parquet(pl.concat(tests).sort(KEY), folder / "demand_forecast.parquet")
    atomic_write_parquet(quantities, folder / "quantity_forecast.parquet")
    scores |= {"test_weeks": [first, last], "seconds": round(time.perf_counter() - start, 1)}
    write_json(folder / "scores.json", scores)
    return scores
