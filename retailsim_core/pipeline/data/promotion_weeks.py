"""Ingest a source's promotion plan week by week (D86): cells and their quarantine published as
one set per week, with the row accounting in its manifest."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

import polars as pl

from retailsim_core.ingest.file_reader import ReadLimits
from retailsim_core.ingest.lgsr_plan import LgsrPlanFiles
from retailsim_core.ingest.promotion_plan import (
    PROMOTIONS_QUARANTINE_SCHEMA,
    SOURCE_PROMOTIONS_SCHEMA,
    PromotionTable,
)
from retailsim_core.pipeline.data.ingest_weeks import reason_counts
from retailsim_core.storage.io import sha256_of
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import PROMOTION_CELLS_TABLE, PROMOTIONS_QUARANTINE_TABLE

SOURCES_WITH_A_TABLE = ("completejourney",)
PROMOTION_REPORT_SCHEMA = pl.Schema(
    {
        "week": pl.Int16,
        "status": pl.String,  # "ok", or "no_table" where the source has no promotion plan
        "rows_read": pl.Int64,
        "rows_kept": pl.Int64,  # source rows merged into the kept cells
        "rows_rejected": pl.Int64,
        "cells": pl.Int64,
        "display_cells": pl.Int64,
        "mailer_cells": pl.Int64,
        "seconds": pl.Float64,
    }
)


def ingest_promotions(
    raw_dir: Path,
    warehouse: Warehouse,
    weeks: Iterable[int],
    source: str,
    limits: ReadLimits = ReadLimits(),
    log: Callable[[str], None] = lambda _: None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Write each week's promotion cells and quarantine; returns (per-week report, quarantine
    reason counts). A week without a plan (an LGSR week without its ``promotions_YYYYWW.csv``,
    dunnhumby's files never have one; an export without ``promotions.parquet``) is written
    empty with the manifest status ``no_table``: a reader can tell "nothing promoted" from
    "nothing known"."""
    # An LGSR-format source has a plan file per week where it has one (D132).
    table = (
        PromotionTable(raw_dir, limits)
        if source in SOURCES_WITH_A_TABLE
        else LgsrPlanFiles(raw_dir, limits)
    )
    reports, reasons = [], []
    for week in weeks:
        start = time.perf_counter()
        present = table.has(week)
        if present:
            cells, quarantine, read = table.week(week)
        else:
            cells = pl.DataFrame(schema=SOURCE_PROMOTIONS_SCHEMA)
            quarantine, read = pl.DataFrame(schema=PROMOTIONS_QUARANTINE_SCHEMA), 0
        kept = int(cells["source_rows"].sum())
        row = {
            "week": week,
            "status": "ok" if present else "no_table",
            "rows_read": read,
            "rows_kept": kept,
            "rows_rejected": quarantine.height,
            "cells": cells.height,
            "display_cells": int(cells["display"].sum()),
            "mailer_cells": int(cells["mailer"].sum()),
        }
        warehouse.write_set(
            week,
            {
                PROMOTION_CELLS_TABLE: (cells, SOURCE_PROMOTIONS_SCHEMA),
                PROMOTIONS_QUARANTINE_TABLE: (quarantine, PROMOTIONS_QUARANTINE_SCHEMA),
            },
            {
                **row,
                "source": source,
                **_source(table, week, present),
            },
        )
        reports.append({**row, "seconds": time.perf_counter() - start})
        if quarantine.height:
            reasons.append(quarantine.select(pl.col("reason").str.split(";")).explode("reason"))
        log(f"week {week}: {row['status']}, {read:,} read, {quarantine.height:,} rejected")
    return pl.DataFrame(reports, schema=PROMOTION_REPORT_SCHEMA), reason_counts(reasons)


def _source(table: PromotionTable | LgsrPlanFiles, week: int, present: bool) -> dict:
    """The manifest's source fields: one table's checksum and rows (accounted over the whole
    source), or the week's own file's checksum (a file per week is accounted in its week)."""
    if not present:
        return {"source_sha256": None, "source_rows": None}
    if isinstance(table, PromotionTable):
        return {"source_sha256": table.sha256, "source_rows": table.source_rows}
    return {"source_sha256": sha256_of(table.path(week)), "source_rows": None}


def known_promotion_weeks(warehouse: Warehouse, weeks: Iterable[int]) -> list[int]:
    """The ``weeks`` whose promotion plan came from a table (manifest status ``ok``)."""
    return [
        w
        for w in weeks
        if (warehouse.manifest(PROMOTION_CELLS_TABLE, w) or {}).get("status") == "ok"
    ]
