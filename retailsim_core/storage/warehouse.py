"""The Parquet warehouse: one folder per table, Hive ``week=<key>/`` folders for weekly tables.

Layout::

    <root>/<table>/week=2006-04-10/_manifest.json            the partition's one pointer
    <root>/<table>/week=2006-04-10/v-<sha16>/part-0.parquet  the data (the file also holds `week`)
    <root>/<table>/_manifest.json, v-<sha16>/part-0.parquet  an unpartitioned table

A partition is published by one atomic rename: its ``_manifest.json``. The manifest names every
file of the partition with its sha256 and row count; a data file goes into a folder named after
its own content, so a new version never overwrites the one a reader may be using. Tables written
together (the raw rows and their quarantine) are a *set*: the first table's manifest lists every
table's file and the others' manifests point at it, so one rename switches them all. A kill at
any moment leaves either the old set or the new one; files of an unpublished version are
invisible (readers only go through manifests) and are swept by the next write.

Readers verify each file's checksum once per process, and resolve every path, which must stay
inside the warehouse root (a symlinked folder cannot redirect a read or a write elsewhere).
Writes are deterministic: the same frame gives the same bytes and the same version folder.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from retailsim_core.calendar import LGSR, SourceCalendar
from retailsim_core.storage.io import atomic_write_text
from retailsim_core.storage.locks import exclusive
from retailsim_core.storage.versions import (  # noqa: F401 - the warehouse's errors, re-exported
    DATA_FILE,
    VERSION_PREFIX,
    CorruptPartitionError,
    WarehousePathError,
    inside,
    stage_version,
    sweep_versions,
    verified_file,
)

MANIFEST_FILE = "_manifest.json"
LOCK_FILE = ".writer.lock"  # writers of a partition take turns on it (never swept)
READ_ATTEMPTS = 3  # a read follows a republished manifest this often before it gives up
LAYOUT = 2  # manifests without a matching ``layout`` predate checksummed versions

log = logging.getLogger(__name__)
_STRAYS_NAMED: set[tuple[str, tuple[str, ...]]] = set()  # (table folder, strays) warned of


class StaleSchemaError(RuntimeError):
    """A partition written with fewer columns than its table has now; the message names it."""


@dataclass(frozen=True)
class Warehouse:
    root: Path
    # Names the week folders (``week=<its Monday>``); the week number is in each manifest.
    calendar: SourceCalendar = LGSR

    # ---------------------------------------------------------------- paths
    @property
    def _root(self) -> Path:
        return Path(self.root).resolve()

    def table_dir(self, table: str) -> Path:
        """The table's folder, which must lie inside the warehouse root (no ``..`` escapes)."""
        path = inside(self._root / table, self._root)
        if path == self._root:
            raise WarehousePathError(
                f"table {table!r} is the warehouse root itself; a table is a "
                "folder inside, never outside the warehouse root"
            )
        return path

    def partition_dir(self, table: str, week: int) -> Path:
        return inside(
            self.table_dir(table) / f"week={self.calendar.week_key_of(week)}", self.table_dir(table)
        )

    def _location(self, table: str, week: int | None) -> Path:
        return self.table_dir(table) if week is None else self.partition_dir(table, week)

    # ---------------------------------------------------------------- writes
    def write_partition(
        self,
        table: str,
        week: int,
        df: pl.DataFrame,
        schema: pl.Schema,
        manifest: dict | None = None,
        compression: str = "zstd",
        compression_level: int | None = None,  # None: the codec's default
    ) -> Path:
        frames = {table: (df, schema)}
        return self.write_set(week, frames, manifest, compression, compression_level)[table]

    def write_table(self, table: str, df: pl.DataFrame, manifest: dict | None = None) -> Path:
        """An unpartitioned table (its own schema is the frame's)."""
        return self.write_set(None, {table: (df, df.schema)}, manifest)[table]

    def write_set(
        self,
        week: int | None,
        frames: dict[str, tuple[pl.DataFrame, pl.Schema]],
        manifest: dict | None = None,
        compression: str = "zstd",
        compression_level: int | None = None,
    ) -> dict[str, Path]:
        """Publish one partition of each table in ``frames`` together, with one atomic rename.

        The first table is the set's primary: its manifest lists every file; the others'
        manifests point at it. Returns each table's published data file.
        """
        for table, (df, schema) in frames.items():
            if df.schema != schema:
                raise ValueError(
                    f"{table}: frame schema {df.schema} differs from the table schema {schema}"
                )
        primary = next(iter(frames))
        # One writer of a partition at a time: another's sweep would delete a version this one
        # staged but has not published yet (D113).
        with exclusive(self._location(primary, week) / LOCK_FILE):
            return self._write_set(week, frames, primary, manifest, compression, compression_level)

    def _write_set(self, week, frames, primary, manifest, compression, compression_level):
        try:  # the versions readers may be reading now: kept a while once superseded
            previous = (self._read_manifest(primary, week) or {}).get("files", {})
        except (CorruptPartitionError, ValueError):
            previous = {}
        files, paths = {}, {}
        for table, (df, _) in frames.items():
            paths[table], files[table] = stage_version(
                self._root, self._location(table, week), df, compression, compression_level
            )
        for table in list(frames)[1:]:  # static pointers: rewriting them changes nothing visible
            pointer = {"table": table, "week": week, "layout": LAYOUT, "set": primary}
            atomic_write_text(
                json.dumps(pointer, indent=2, sort_keys=True),
                self._location(table, week) / MANIFEST_FILE,
            )
        body = {
            **(manifest or {}),
            "table": primary,
            "week": week,
            "layout": LAYOUT,
            "rows": files[primary]["rows"],
            "files": files,
        }
        atomic_write_text(
            json.dumps(body, indent=2, sort_keys=True),
            self._location(primary, week) / MANIFEST_FILE,
        )
        for table in frames:  # new readers go to the new version; readers in flight finish
            folder = self._location(table, week)
            old = (previous.get(table) or {}).get("path")
            if old and (old_version := self._root / Path(old).parent).is_dir():
                os.utime(old_version)  # superseded now: swept by a write after the grace
            sweep_versions(folder, keep=paths[table].parent.name)
        return paths

    # ---------------------------------------------------------------- reads
    def _read_manifest(self, table: str, week: int | None) -> dict | None:
        path = inside(self._location(table, week) / MANIFEST_FILE, self._root)
        if not path.exists():
            return None
        body = json.loads(path.read_text())
        if body.get("layout") != LAYOUT:
            raise CorruptPartitionError(
                f"{path}: written by an older RetailSim warehouse layout "
                "(no checksums); re-materialize this table"
            )
        return body

    def manifest(self, table: str, week: int | None = None) -> dict | None:
        """The partition's manifest (a set member's is its primary's, with its own row count)."""
        body = self._read_manifest(table, week)
        if body is None or "set" not in body:
            return body
        primary = self._read_manifest(body["set"], week)
        if primary is None or table not in primary.get("files", {}):
            raise CorruptPartitionError(
                f"{self._location(table, week)}: points at {body['set']}, "
                f"whose manifest does not list {table}; "
                "re-materialize both"
            )
        return {**primary, "table": table, "rows": primary["files"][table]["rows"]}

    def data_file(self, table: str, week: int | None = None) -> Path | None:
        """The published, checksum-verified data file of one partition (None if never written).
        A file that vanishes or changes under a new manifest is a concurrent publish, not
        damage: the read follows the new manifest (D113)."""
        for _ in range(READ_ATTEMPTS):
            body = self.manifest(table, week)
            if body is None:
                return None
            try:
                return verified_file(self._root, table, week, body["files"][table])
            except CorruptPartitionError:
                if self.manifest(table, week) == body:
                    raise  # the manifest still names this file: it is damaged
        raise CorruptPartitionError(
            f"{self._location(table, week)}: republished {READ_ATTEMPTS} times while being "
            "read; read it again once its writers are done"
        )

    def read_table(self, table: str) -> pl.DataFrame:
        path = self.data_file(table)
        if path is None:
            raise FileNotFoundError(
                f"{table} is not materialized under {self._root}; materialize it first"
            )
        return pl.read_parquet(path)

    def require_weeks(self, table: str, weeks: Iterable[int]) -> None:
        """Fail clearly when a week a step needs has never been materialized."""
        for week in weeks:
            if self.manifest(table, week) is None:
                raise FileNotFoundError(
                    f"{table} week {week} is not materialized; materialize it first"
                )

    def weeks(self, table: str) -> list[int]:
        """Weeks that have a published partition (missing-file weeks included, with 0 rows).

        A partition is a folder named exactly ``week=<a Monday of the calendar>`` holding a
        manifest of that week (D113): a backup copy (``week=2006-04-10.bak``) or a stray folder
        is no partition and is never read (a warning names it, once per process and set of
        strays); a partition folder whose
        manifest is unreadable or names another week is an error naming the file."""
        folder = self.table_dir(table)
        out, stray = [], []
        for child in sorted(folder.glob("week=*")):
            week = self._week_of_folder(child.name)
            if week is None:
                stray.append(child.name)
                continue
            path = inside(child / MANIFEST_FILE, folder)
            if not path.exists():
                continue  # never published (a first write in progress, or an empty folder)
            try:
                named = json.loads(path.read_text())["week"]
            except (OSError, ValueError, KeyError, TypeError) as err:
                raise CorruptPartitionError(
                    f"{path}: not a partition manifest ({type(err).__name__}: {err}); "
                    "re-materialize that partition"
                ) from err
            if named != week:
                raise CorruptPartitionError(
                    f"{path}: names week {named!r} but lies in the folder of week {week}; "
                    "re-materialize that partition"
                )
            out.append(week)
        if stray and (str(folder), tuple(stray)) not in _STRAYS_NAMED:
            _STRAYS_NAMED.add((str(folder), tuple(stray)))  # once a process: weeks() runs often
            log.warning(
                "%s: %s not read: not a partition folder (week=<a Monday of %s's calendar>)",
                folder,
                ", ".join(stray),
                self.calendar.source,
            )
        return out

    def _week_of_folder(self, name: str) -> int | None:
        """The week of a folder named ``week=<key>`` with the calendar's own key, else None."""
        key = name.removeprefix("week=")
        try:
            week = self.calendar.week_of_key(key)
        except ValueError:
            return None
        return week if self.calendar.week_key_of(week) == key else None

    def missing_weeks(self, table: str) -> list[int]:
        """Weeks whose source file was missing: gaps that later stages must treat as such."""
        return [
            w
            for w in self.weeks(table)
            if (self.manifest(table, w) or {}).get("status") == "missing"
        ]

    def files(self, table: str, weeks: Iterable[int] | None = None) -> list[Path]:
        """Published data files of a weekly table, all weeks or the given ones (absent: skipped)."""
        weeks = self.weeks(table) if weeks is None else weeks
        return [p for w in weeks if (p := self.data_file(table, w)) is not None]

    def scan(
        self, table: str, weeks: Iterable[int] | None = None, schema: pl.Schema | None = None
    ) -> pl.LazyFrame:
        """Lazy scan of a weekly table, all weeks or the given ones (absent ones are skipped)."""
        files = self.files(table, weeks)
        if not files:
            if schema is None:
                raise FileNotFoundError(f"no partitions of {table} under {self.table_dir(table)}")
            return schema.to_frame().lazy()
        if schema is not None:  # a footer read per file: a clear error, not a failed collect
            for f in files:
                missing = [c for c in schema.names() if c not in pl.read_parquet_schema(f)]
                if missing:
                    raise StaleSchemaError(
                        f"{table}: {f} lacks the columns {missing}; it was written by an "
                        f"earlier version: re-materialize {table} for its weeks"
                    )
        return pl.scan_parquet(files, hive_partitioning=False, schema=schema)
