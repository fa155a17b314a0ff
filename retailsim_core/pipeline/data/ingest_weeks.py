"""Ingest a range of LGSR weeks into the warehouse, two weeks in flight (bounded memory)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl

from retailsim_core.ingest import completejourney, completejourney_source
from retailsim_core.ingest.file_reader import ReadLimits
from retailsim_core.ingest.lgsr import QUARANTINE_SCHEMA, RAW_TRANSACTIONS_SCHEMA
from retailsim_core.ingest.week_file import (
    IngestResult,
    LGSRFileError,
    check_raw_folder,
    expected_file_name,
    find_week_file,
    ingest_week,
)
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import QUARANTINE_TABLE, RAW_TABLE

WEEKS_IN_FLIGHT = 2

INGEST_REPORT_SCHEMA = pl.Schema(
    {
        "week": pl.Int16,
        "source_file": pl.String,
        "status": pl.String,
        "header_variant": pl.String,
        "rows_read": pl.Int64,
        "rows_kept": pl.Int64,
        "rows_rejected": pl.Int64,
        "seconds": pl.Float64,
    }
)


def _write_week(warehouse: Warehouse, result: IngestResult, expected_file: str) -> None:
    manifest = {
        "status": "missing" if result.missing else "ok",
        "expected_file": expected_file,
        "source_file": result.source_file,
        "header_variant": result.header_variant,
        "rows_read": result.rows_read,
        "rows_kept": result.kept.height,
        "rows_rejected": result.quarantine.height,
        "source_sha256": result.source_sha256,
        "source_rows": result.source_rows,
    }
    # One set: the kept rows and their quarantine are published by the same rename.
    warehouse.write_set(
        result.week,
        {
            RAW_TABLE: (result.kept, RAW_TRANSACTIONS_SCHEMA),
            QUARANTINE_TABLE: (result.quarantine, QUARANTINE_SCHEMA),
        },
        manifest,
    )


def _refuse_vanished_files(
    raw_dir: Path, warehouse: Warehouse, weeks: list[int], replace: bool
) -> None:
    """A week ingested from a file whose file is now gone is not replaced by an empty partition
    unless asked: a wrong or half-copied raw folder must not destroy good data."""
    vanished = [
        w
        for w in weeks
        if find_week_file(raw_dir, w) is None
        and (warehouse.manifest(RAW_TABLE, w) or {}).get("status") == "ok"
    ]
    if vanished and not replace:
        names = ", ".join(expected_file_name(w) for w in vanished[:5])
        more = ", ..." if len(vanished) > 5 else ""
        raise LGSRFileError(
            f"{len(vanished)} week(s) were ingested from a file that {raw_dir} "
            f"no longer holds ({names}{more}); restore the files, or set the "
            "raw_source resource's replace_vanished_weeks to true to replace "
            "those partitions by empty, missing-file ones"
        )


def ingest_weeks(
    raw_dir: Path,
    warehouse: Warehouse,
    weeks: Iterable[int],
    log: Callable[[str], None] = lambda _: None,
    replace_vanished: bool = False,
    limits: ReadLimits = ReadLimits(),
    source: str = "lgsr",
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Ingest each week into ``raw_transactions`` and ``raw_transactions_quarantine``.

    Returns (per-week report, quarantine reason counts). A missing week file is written as an
    empty partition with ``status: missing`` in its manifest, never as a silent success. The
    raw folder is checked before any work: absent or without a single week file is an error,
    and so is a week file that vanished since its week was ingested (``replace_vanished``).
    """
    raw_dir = Path(raw_dir)
    reports, reasons = [], []
    weeks = list(weeks)
    if source == "completejourney":  # one export of Parquet tables (D85)
        export = completejourney_source.Export(raw_dir, limits)
        read, expected = export.week, lambda _: completejourney.TRANSACTIONS_FILE
    else:
        check_raw_folder(raw_dir)
        _refuse_vanished_files(raw_dir, warehouse, weeks, replace_vanished)
        read, expected = (lambda w: ingest_week(raw_dir, w, limits)), expected_file_name

    def one_week(week: int) -> tuple[IngestResult, float]:
        start = time.perf_counter()
        result = read(week)
        _write_week(warehouse, result, expected(week))
        return result, time.perf_counter() - start

    # Two weeks in flight: polars and hashlib release the GIL, so one week's single-threaded
    # phases (hashing, Parquet encoding, fsync) overlap the other's parsing. Results are taken
    # in week order; memory stays bounded at two weeks.
    with ThreadPoolExecutor(max_workers=WEEKS_IN_FLIGHT, thread_name_prefix="ingest") as pool:
        for i, (result, seconds) in enumerate(pool.map(one_week, weeks), 1):
            status = "missing" if result.missing else "ok"
            reports.append(
                {
                    "week": result.week,
                    "source_file": result.source_file,
                    "status": status,
                    "header_variant": result.header_variant,
                    "rows_read": result.rows_read,
                    "rows_kept": result.kept.height,
                    "rows_rejected": result.quarantine.height,
                    "seconds": seconds,
                }
            )
            if result.quarantine.height:
                reasons.append(
                    result.quarantine.select(pl.col("reason").str.split(";")).explode("reason")
                )
            log(
                f"[{i}/{len(weeks)}] week {result.week}: {status}, {result.rows_read:,} read, "
                f"{result.quarantine.height:,} rejected, {seconds:.2f}s"
            )
    return pl.DataFrame(reports, schema=INGEST_REPORT_SCHEMA), reason_counts(reasons)


def reason_counts(reasons: list[pl.DataFrame]) -> pl.DataFrame:
    """reason, rows: how many quarantined rows give each reason, most first, from frames of
    one ``reason`` per row (split from the ";"-joined lists)."""
    if not reasons:
        return pl.DataFrame(schema={"reason": pl.String, "rows": pl.UInt32})
    counts = pl.concat(reasons).group_by("reason").len("rows")
    return counts.sort("rows", "reason", descending=[True, False])


def source_accounting(warehouse: Warehouse, table: str = RAW_TABLE) -> dict:
    """Row accounting over the whole source, not only the weeks of a run (D113): where every
    week is read from one table (The Complete Journey), the rows read by the published weeks of
    that table's version add up to its rows once every week is published, and never exceed
    them. A source of a file per week has nothing to add: each file is accounted in its week."""
    weeks = warehouse.weeks(table)
    manifests = [warehouse.manifest(table, w) for w in weeks]
    tables = {(m.get("source_sha256"), m.get("source_rows")) for m in manifests}
    tables = {t for t in tables if t[1] is not None}
    if not tables:
        return {"passed": True, "note": "a file per week: accounted week by week"}
    if len(tables) > 1:
        return {"passed": False, "note": "weeks read from different versions of the source"}
    ((_, rows),) = tables
    counted = sum(m["rows_read"] for m in manifests)
    complete = len(weeks) == warehouse.calendar.n_weeks
    return {
        "passed": counted == rows if complete else counted <= rows,
        "source_rows": rows,
        "rows_counted": counted,
        "weeks_published": len(weeks),
        "note": "every week published" if complete else "weeks still to ingest",
    }
