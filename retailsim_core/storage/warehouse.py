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
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from retailsim_core.calendar import LGSR, SourceCalendar
from retailsim_core.storage.io import (
    atomic_write_text,
    process_alive,
    sha256_of,
    temp_name_pid,
    write_temp,
)

DATA_FILE = "part-0.parquet"
MANIFEST_FILE = "_manifest.json"
VERSION_PREFIX = "v-"
LAYOUT = 2  # manifests without a matching ``layout`` predate checksummed versions

# (path, size, mtime_ns) -> verified sha256: a file is hashed once per process, not per read.
_VERIFIED: dict[tuple[str, int, int], str] = {}


class CorruptPartitionError(RuntimeError):
    """A warehouse file that is damaged, missing or of an older layout; the message names it."""


class StaleSchemaError(RuntimeError):
    """A partition written with fewer columns than its table has now; the message names it."""


class WarehousePathError(ValueError):
    """A warehouse path that resolves outside the warehouse root."""


def _inside(path: Path, parent: Path) -> Path:
    resolved = path.resolve()
    if resolved != parent and parent not in resolved.parents:
        raise WarehousePathError(
            f"{path} resolves to {resolved}, outside the warehouse root "
            f"({parent}); no '..' and no links that leave it"
        )
    return resolved


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
        path = _inside(self._root / table, self._root)
        if path == self._root:
            raise WarehousePathError(
                f"table {table!r} is the warehouse root itself; a table is a "
                "folder inside, never outside the warehouse root"
            )
        return path

    def partition_dir(self, table: str, week: int) -> Path:
        return _inside(
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
        files, paths = {}, {}
        for table, (df, _) in frames.items():
            paths[table], files[table] = self._stage(
                self._location(table, week), df, compression, compression_level
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
        for table in frames:  # the old versions are unreachable now
            self._sweep(self._location(table, week), keep=paths[table].parent.name)
        return paths

    def _stage(
        self, folder: Path, df: pl.DataFrame, compression: str, level: int | None
    ) -> tuple[Path, dict]:
        """Write ``df`` into ``folder/v-<sha16>/part-0.parquet`` (not yet published)."""
        # Statistics on, no per-write metadata that varies: same frame, same bytes.
        tmp = write_temp(
            folder,
            "staging",
            lambda p: df.write_parquet(
                p, compression=compression, compression_level=level, statistics=True
            ),
        )
        try:
            digest = sha256_of(tmp)
            version = _inside(folder / f"{VERSION_PREFIX}{digest[:16]}", folder)
            version.mkdir(exist_ok=True)
            os.replace(tmp, version / DATA_FILE)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        rel = (version / DATA_FILE).relative_to(self._root).as_posix()
        return version / DATA_FILE, {"path": rel, "sha256": digest, "rows": df.height}

    @staticmethod
    def _sweep(folder: Path, keep: str) -> None:
        """Remove superseded versions and the temporary files of writers that died."""
        for child in folder.iterdir():
            if (
                child.is_dir()
                and not child.is_symlink()
                and child.name.startswith(VERSION_PREFIX)
                and child.name != keep
            ):
                shutil.rmtree(child, ignore_errors=True)
            elif (pid := temp_name_pid(child.name)) is not None and not process_alive(pid):
                child.unlink(missing_ok=True)

    # ---------------------------------------------------------------- reads
    def _read_manifest(self, table: str, week: int | None) -> dict | None:
        path = _inside(self._location(table, week) / MANIFEST_FILE, self._root)
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
        """The published, checksum-verified data file of one partition (None if never written)."""
        body = self.manifest(table, week)
        if body is None:
            return None
        entry = body["files"][table]
        path = _inside(self._root / entry["path"], self._root)
        where = f"table {table}" + ("" if week is None else f", week {week}")
        try:
            st = path.stat()
        except FileNotFoundError as err:
            raise CorruptPartitionError(
                f"{path} ({where}): listed in its manifest but missing; "
                "re-materialize that partition"
            ) from err
        key = (str(path), st.st_size, st.st_mtime_ns)
        if _VERIFIED.get(key) != entry["sha256"]:
            if sha256_of(path) != entry["sha256"]:
                raise CorruptPartitionError(
                    f"{path} ({where}): checksum differs from its manifest "
                    "(the file is damaged); re-materialize that partition"
                )
            _VERIFIED[key] = entry["sha256"]
        return path

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
        """Weeks that have a published partition (missing-file weeks included, with 0 rows)."""
        folder = self.table_dir(table)
        out = []
        for path in folder.glob(f"week=*/{MANIFEST_FILE}"):
            _inside(path, folder)
            out.append(int(json.loads(path.read_text())["week"]))
        return sorted(out)

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
