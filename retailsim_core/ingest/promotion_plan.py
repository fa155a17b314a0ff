"""A source's promotion plan: which products were on display or in the mailer at which store
in which week, recorded whether or not anything sold (design §2.2, §6.2; decisions D76, D86).

This is what a retailer knows before the week's sales, so it is both a shelf input the model
may read for the week's baskets and the one honest ground for a price-response check. LGSR has
no such table; *The Complete Journey* ships ``promotions.parquet`` (product_id, store_id,
display_location, mailer_location, week), one row per promoted product × store × week.

The mapping, with the same row accounting as transaction lines (rows read = rows kept + rows
quarantined, where a kept cell counts the source rows merged into it):

- identifiers take the canonical form of ``completejourney`` (``PRD``/``STORE`` + number);
- ``display`` is a display location other than "0", ``mailer`` a mailer location other than
  "0"; both location codes are kept verbatim (their meaning is the source's);
- rows naming the same cell twice (12,785 in the release) are one cell: a flag is set when any
  row sets it, its location is the smallest code that is not "0";
- quarantined with a reason: a product missing from ``products``, a product of an excluded
  department or category (fuel, coupons: not on the model's shelf either), a null location, a
  row that sets neither flag.

Glossary: N source rows of a week, C promoted cells.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from retailsim_core.ingest.completejourney import (
    PRODUCTS_FILE,
    canonical_id,
    check_schema,
    home_week,
    product_rules,
    product_table,
    with_reasons,
)
from retailsim_core.ingest.completejourney_source import naming, table_rows
from retailsim_core.ingest.file_reader import ReadLimits, settled_stat, unchanged_since
from retailsim_core.storage.io import sha256_of

PROMOTIONS_FILE = "promotions.parquet"
SOURCE_SCHEMA = pl.Schema(
    {
        "product_id": pl.Int64,
        "store_id": pl.Int64,
        "display_location": pl.String,
        "mailer_location": pl.String,
        "week": pl.Int64,
    }
)
SOURCE_PROMOTIONS_SCHEMA = pl.Schema(
    {
        "week": pl.Int16,
        "product_id": pl.String,
        "store_id": pl.String,
        "display": pl.Boolean,
        "mailer": pl.Boolean,
        "display_location": pl.String,  # the source's code; "0" = not on display
        "mailer_location": pl.String,  # the source's code; "0" = not in the mailer
        "source_rows": pl.UInt32,  # source rows merged into this cell (row accounting)
    }
)
PROMOTIONS_QUARANTINE_SCHEMA = pl.Schema(
    {
        "week": pl.Int16,
        "record_number": pl.Int64,  # 1-based row of the source table
        "reason": pl.String,  # every failing rule, ";"-separated
        "product_id": pl.Int64,
        "store_id": pl.Int64,
        "display_location": pl.String,
        "mailer_location": pl.String,
    }
)
NOT_PROMOTED = "0"
CELL = ("week", "product_id", "store_id")


def _rules(week: int) -> list[tuple[pl.Expr, str]]:
    """(failure condition, reason) per rule; every failing rule is reported."""
    display, mailer = pl.col("display_location"), pl.col("mailer_location")
    return [
        (pl.col("week") != week, "week_outside_calendar"),  # counted in the nearest end's week
        *product_rules(),
        (display.is_null(), "missing:display_location"),
        (mailer.is_null(), "missing:mailer_location"),
        ((display == NOT_PROMOTED) & (mailer == NOT_PROMOTED), "not_a_promotion"),
        (pl.col("product_id").is_null() | pl.col("store_id").is_null(), "missing:identifier"),
    ]


def week_promotions(
    promotions: pl.LazyFrame, products: pl.LazyFrame, week: int
) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """(cells in SOURCE_PROMOTIONS_SCHEMA, quarantine in PROMOTIONS_QUARANTINE_SCHEMA, rows read)
    of the source's ``week``: every source row of the week is merged into a kept cell or
    quarantined with its reasons."""
    rows = (
        check_schema(promotions, SOURCE_SCHEMA, PROMOTIONS_FILE)
        .with_row_index("record_number", offset=1)
        .filter(home_week(pl.col("week")) == week)
        .join(
            product_table(products).select(
                "product_id", "department", "product_category", "_ambiguous"
            ),
            on="product_id",
            how="left",
        )
        .pipe(with_reasons, _rules(week))
        .collect()
    )
    bad = rows.filter(pl.col("_bad")).sort("record_number")
    quarantine = bad.select(PROMOTIONS_QUARANTINE_SCHEMA.names()).cast(
        dict(PROMOTIONS_QUARANTINE_SCHEMA)
    )
    return _cells(rows.filter(~pl.col("_bad"))), quarantine, rows.height


def _location(name: str) -> pl.Expr:
    """The cell's location code: the smallest of its rows' codes other than "0", else "0"."""
    code = pl.col(name)
    return code.filter(code != NOT_PROMOTED).min().fill_null(NOT_PROMOTED).alias(name)


def _cells(rows: pl.DataFrame) -> pl.DataFrame:
    return (
        rows.with_columns(
            canonical_id("PRD", "product_id", 7), canonical_id("STORE", "store_id", 5)
        )
        .group_by(CELL)
        .agg(_location("display_location"), _location("mailer_location"), source_rows=pl.len())
        .with_columns(
            display=pl.col("display_location") != NOT_PROMOTED,
            mailer=pl.col("mailer_location") != NOT_PROMOTED,
        )
        .select(SOURCE_PROMOTIONS_SCHEMA.names())
        .cast(dict(SOURCE_PROMOTIONS_SCHEMA))
        .sort(CELL)
    )


class PromotionTable:
    """A folder's ``promotions.parquet`` beside the ``products.parquet`` it is checked against
    (what ``completejourney_export`` writes). ``present`` is False where the source has none;
    then every week has no cells and the reason says so."""

    def __init__(self, folder: Path, limits: ReadLimits = ReadLimits()):
        self.folder = Path(folder)
        self.path = self.folder / PROMOTIONS_FILE
        self.present = self.path.is_file()
        self._stats = {}
        self.sha256, self.source_rows = None, None
        if self.present:
            self.source_rows = table_rows(self.path)
            self._stats = {n: settled_stat(self.folder / n, limits) for n in (PROMOTIONS_FILE,)}
            self._stats[PRODUCTS_FILE] = settled_stat(self.folder / PRODUCTS_FILE, limits)
            self.sha256 = sha256_of(self.path)

    def has(self, week: int) -> bool:
        """Whether ``week``'s plan is known: one table covers every week."""
        return self.present

    def week(self, week: int) -> tuple[pl.DataFrame, pl.DataFrame, int]:
        """(cells, quarantine, rows read) of ``week``; empty where the source has no table."""
        if not self.present:
            empty = pl.DataFrame(schema=SOURCE_PROMOTIONS_SCHEMA)
            return empty, pl.DataFrame(schema=PROMOTIONS_QUARANTINE_SCHEMA), 0
        with naming(self.folder, (PROMOTIONS_FILE, PRODUCTS_FILE)):
            out = week_promotions(
                pl.scan_parquet(self.path), pl.scan_parquet(self.folder / PRODUCTS_FILE), week
            )
        for name, st in self._stats.items():  # the tables read are the ones checked at start
            unchanged_since(self.folder / name, st)
        return out
