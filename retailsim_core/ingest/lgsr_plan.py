"""An LGSR-format source's promotion plan: one optional file per week beside its transactions
(``promotions_YYYYWW.csv``: PROD_CODE, STORE_CODE, DISPLAY, MAILER; flags "0" or "1"), the
products on display or in the mailer at each store that week, known before its sales (D132).

dunnhumby's LGSR ships no plan; the synthetic generator writes one. A week whose file is absent
has no plan ("no_table": unknown, not "nothing promoted"). Rows are checked as a transaction
line is: rows read = rows merged into kept cells + rows quarantined, every failing rule named:

- identifiers must match LGSR's patterns (PRD + 7 digits, STORE + 5 digits);
- DISPLAY and MAILER must be "0" or "1", and at least one "1" (a row that promotes nothing);
- rows naming the same cell twice are one cell, a flag set when any row sets it.

Glossary: N rows of a week's file, C promoted cells.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from retailsim_core.calendar import plan_file_stem
from retailsim_core.ingest.file_reader import (
    ReadLimits,
    WeekFileError,
    read_csv_text,
    read_header,
    settled_stat,
    unchanged_since,
    week_text,
)
from retailsim_core.ingest.lgsr import ID_PATTERNS
from retailsim_core.ingest.promotion_plan import (
    PROMOTIONS_QUARANTINE_SCHEMA,
    SOURCE_PROMOTIONS_SCHEMA,
)

PLAN_FILE = re.compile(r"^promotions_([0-9]{6})\.csv$", re.IGNORECASE)  # ASCII digits
PLAN_COLUMNS = ("PROD_CODE", "STORE_CODE", "DISPLAY", "MAILER")
FLAGS = ("0", "1")
_CELL = ("product_id", "store_id")


def plan_rules() -> list[tuple[pl.Expr, str]]:
    """(failure condition, reason) per rule; every failing rule is reported."""
    display, mailer = pl.col("DISPLAY"), pl.col("MAILER")
    return [
        *[
            (pl.col(c).is_null() | ~pl.col(c).str.contains(ID_PATTERNS[c]), f"invalid:{c}")
            for c in ("PROD_CODE", "STORE_CODE")
        ],
        *[
            (~pl.col(c).is_in(FLAGS).fill_null(False), f"invalid:{c}")
            for c in ("DISPLAY", "MAILER")
        ],
        ((display == "0") & (mailer == "0"), "not_a_promotion"),
    ]


def plan_cells(rows: pl.DataFrame, week: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(cells in SOURCE_PROMOTIONS_SCHEMA, quarantine in PROMOTIONS_QUARANTINE_SCHEMA) of a
    week's plan rows (PLAN_COLUMNS as text and ``record_number``)."""
    failures = [pl.when(bad.fill_null(False)).then(pl.lit(name)) for bad, name in plan_rules()]
    checked = rows.with_columns(reason=pl.concat_str(failures, separator=";", ignore_nulls=True))
    checked = checked.with_columns(pl.col("reason").replace("", None))
    bad = checked.filter(pl.col("reason").is_not_null())
    quarantine = bad.select(
        week=pl.lit(week),
        record_number=pl.col("record_number"),
        reason=pl.col("reason"),
        product_id=pl.lit(None),
        store_id=pl.lit(None),
        display_location=pl.col("DISPLAY"),
        mailer_location=pl.col("MAILER"),
    ).cast(dict(PROMOTIONS_QUARANTINE_SCHEMA))
    cells = (
        checked.filter(pl.col("reason").is_null())
        .rename({"PROD_CODE": "product_id", "STORE_CODE": "store_id"})
        .group_by(_CELL)
        .agg(
            display_location=pl.col("DISPLAY").max(),
            mailer_location=pl.col("MAILER").max(),
            source_rows=pl.len(),
        )
        .with_columns(
            week=pl.lit(week),
            display=pl.col("display_location") == "1",
            mailer=pl.col("mailer_location") == "1",
        )
        .select(SOURCE_PROMOTIONS_SCHEMA.names())
        .cast(dict(SOURCE_PROMOTIONS_SCHEMA))
        .sort("week", *_CELL)
    )
    return cells, quarantine


class LgsrPlanFiles:
    """The weekly plan files of an LGSR-format raw folder. ``present``: the folder has any;
    ``has(week)``: that week's file is there."""

    def __init__(self, folder: Path, limits: ReadLimits = ReadLimits()):
        self.folder, self.limits = Path(folder), limits
        names = [p.name for p in self.folder.iterdir()] if self.folder.is_dir() else []
        self._files = {n.lower(): self.folder / n for n in names if PLAN_FILE.match(n)}
        self.present = bool(self._files)

    def path(self, week: int) -> Path | None:
        return self._files.get(f"{plan_file_stem(week)}.csv")

    def has(self, week: int) -> bool:
        return self.path(week) is not None

    def week(self, week: int) -> tuple[pl.DataFrame, pl.DataFrame, int]:
        """(cells, quarantine, rows read) of ``week``; empty where the week has no file."""
        path = self.path(week)
        if path is None:
            empty = pl.DataFrame(schema=SOURCE_PROMOTIONS_SCHEMA)
            return empty, pl.DataFrame(schema=PROMOTIONS_QUARANTINE_SCHEMA), 0
        st = settled_stat(path, self.limits)
        text = week_text(path, st, self.limits)
        header = read_header(text, path).decode("utf-8-sig", "replace").strip().split(",")
        missing = [c for c in PLAN_COLUMNS if c not in header]
        if missing:
            raise WeekFileError(f"{path}: the plan file lacks the columns {missing}")
        rows = read_csv_text(text, path).select("record_number", *PLAN_COLUMNS)
        unchanged_since(path, st)
        cells, quarantine = plan_cells(rows, week)
        return cells, quarantine, rows.height
