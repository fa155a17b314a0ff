"""The report stage: the evaluation's files in the ``evaluation_report`` folder, each written
atomically — ``metrics.json`` ({task: {slice: {method: {metric: value}}}}), ``intervals.json``
(95% customer-bootstrap intervals, and of each method's difference from the world model),
``metrics.parquet`` (long), ``calibration.parquet``, ``tuning.json``, ``elasticities.parquet``,
the promotion events' ``price_events.parquet`` and ``price_event_products.parquet`` (D76) and
the self-contained ``report.html``."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from retailsim_core.report.html import render_report
from retailsim_core.storage.io import atomic_write_parquet, atomic_write_text

LONG_METRICS_SCHEMA = pl.Schema(
    {
        "task": pl.String,
        "slice": pl.String,
        "method": pl.String,
        "metric": pl.String,
        "value": pl.Float64,
    }
)


def long_metrics(metrics: dict) -> pl.DataFrame:
    rows = [
        {"task": t, "slice": s, "method": m, "metric": k, "value": float(v)}
        for t, by_slice in metrics.items()
        for s, by_method in by_slice.items()
        for m, vals in by_method.items()
        for k, v in vals.items()
    ]
    return pl.DataFrame(rows, schema=LONG_METRICS_SCHEMA)


def _json(value: dict) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str) + "\n"


def write_report(
    folder: Path,
    metrics: dict,
    bounds: dict,
    calibration: pl.DataFrame,
    tuning: dict,
    response: dict,
    tables: dict[str, pl.DataFrame] | None = None,
) -> None:
    """Every file of the report; ``tables``: more Parquet files, by name."""
    for name, table in (tables or {}).items():
        atomic_write_parquet(table, folder / f"{name}.parquet")
    atomic_write_text(_json(metrics), folder / "metrics.json")
    atomic_write_text(_json(bounds), folder / "intervals.json")
    atomic_write_parquet(long_metrics(metrics), folder / "metrics.parquet")
    atomic_write_parquet(calibration, folder / "calibration.parquet")
    atomic_write_text(_json(tuning), folder / "tuning.json")
    atomic_write_parquet(response["elasticities"], folder / "elasticities.parquet")
    atomic_write_text(
        render_report(metrics, calibration, tuning, response, bounds), folder / "report.html"
    )
