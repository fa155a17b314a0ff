"""The Parquet warehouse: one folder per table, Hive ``week=<key>/`` folders for weekly tables.

Layout::

    <root>/<table>/week=2006-04-10/part-0.parquet     the data (the file also holds `week`)
    <root>/<table>/week=2006-04-10/_manifest.json     row accounting, source file, status
    <root>/<table>/part-0.parquet                     an unpartitioned table

Writes are atomic and deterministic, so re-materializing a partition gives identical bytes.
Readers glob ``*/part-0.parquet`` with Hive partitioning off: the ``week`` column inside the
files (1..117) is authoritative; the folder name is the Dagster partition key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from retailsim_core.calendar import week_key_of
from retailsim_core.io import atomic_write_parquet, atomic_write_text

DATA_FILE = "part-0.parquet"


class CorruptPartitionError(RuntimeError):
    """A warehouse file that cannot be read; the message names it."""
MANIFEST_FILE = "_manifest.json"


@dataclass(frozen=True)
class Warehouse:
    root: Path

    def table_dir(self, table: str) -> Path:
        """The table's folder, which must lie inside the warehouse root (no ``..`` escapes)."""
        root = Path(self.root).resolve()
        path = (root / table).resolve()
        if path == root or root not in path.parents:
            raise ValueError(f"table {table!r} resolves outside the warehouse root {root}")
        return path

    def partition_dir(self, table: str, week: int) -> Path:
        return self.table_dir(table) / f"week={week_key_of(week)}"

    def write_partition(self, table: str, week: int, df: pl.DataFrame, schema: pl.Schema,
                        manifest: dict | None = None, compression: str = "zstd") -> Path:
        """Write the data file, then its manifest (readers trust a partition with a manifest)."""
        if df.schema != schema:
            raise ValueError(f"{table}: frame schema {df.schema} differs from the table schema {schema}")
        folder = self.partition_dir(table, week)
        path = atomic_write_parquet(df, folder / DATA_FILE, compression)
        atomic_write_text(json.dumps({"table": table, "week": week, "rows": df.height, **(manifest or {})},
                                     indent=2, sort_keys=True), folder / MANIFEST_FILE)
        return path

    def write_table(self, table: str, df: pl.DataFrame) -> Path:
        return atomic_write_parquet(df, self.table_dir(table) / DATA_FILE)

    def manifest(self, table: str, week: int) -> dict | None:
        path = self.partition_dir(table, week) / MANIFEST_FILE
        return json.loads(path.read_text()) if path.exists() else None

    def require_weeks(self, table: str, weeks: Iterable[int]) -> None:
        """Fail clearly when a week a step needs has never been materialized."""
        for week in weeks:
            if self.manifest(table, week) is None:
                raise FileNotFoundError(f"{table} week {week} is not materialized; materialize it first")

    def weeks(self, table: str) -> list[int]:
        """Weeks that have a written partition (missing-file weeks included, with 0 rows)."""
        out = []
        for path in self.table_dir(table).glob(f"week=*/{MANIFEST_FILE}"):
            out.append(int(json.loads(path.read_text())["week"]))
        return sorted(out)

    def missing_weeks(self, table: str) -> list[int]:
        """Weeks whose source file was missing: gaps that later stages must treat as such."""
        return [w for w in self.weeks(table) if (self.manifest(table, w) or {}).get("status") == "missing"]

    def scan(self, table: str, weeks: Iterable[int] | None = None,
             schema: pl.Schema | None = None) -> pl.LazyFrame:
        """Lazy scan of a weekly table, all weeks or the given ones (absent ones are skipped)."""
        if weeks is None:
            files = sorted(self.table_dir(table).glob(f"week=*/{DATA_FILE}"))
        else:
            files = [p for w in weeks if (p := self.partition_dir(table, w) / DATA_FILE).exists()]
        if not files:
            if schema is None:
                raise FileNotFoundError(f"no partitions of {table} under {self.table_dir(table)}")
            return schema.to_frame().lazy()
        for path in files:  # a cheap footer read: a damaged file fails here, naming itself
            try:
                pq.read_metadata(path)
            except Exception as err:  # pyarrow raises several types for damaged files
                raise CorruptPartitionError(f"{path}: not a readable Parquet file ({err}); "
                                            f"re-materialize that partition") from err
        return pl.scan_parquet(files, hive_partitioning=False, schema=schema)
