"""The warehouse's version files: a partition's data goes into a folder named after its own
content (``v-<sha16>/part-0.parquet``), staged before the manifest that publishes it, swept once
superseded, and verified against the manifest's checksum when read (once per process)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import polars as pl

from retailsim_core.storage.io import process_alive, sha256_of, temp_name_pid, write_temp

DATA_FILE = "part-0.parquet"
VERSION_PREFIX = "v-"
# How long a superseded version stays readable: longer than a read of one file takes.
SWEEP_GRACE_SECONDS = 120.0

# (path, size, mtime_ns) -> verified sha256: a file is hashed once per process, not per read.
_VERIFIED: dict[tuple[str, int, int], str] = {}


class CorruptPartitionError(RuntimeError):
    """A warehouse file that is damaged, missing or of an older layout; the message names it."""


class WarehousePathError(ValueError):
    """A warehouse path that resolves outside the warehouse root."""


def inside(path: Path, parent: Path) -> Path:
    """``path`` resolved, which must lie in ``parent`` (no ``..``, no link that leaves it)."""
    resolved = path.resolve()
    if resolved != parent and parent not in resolved.parents:
        raise WarehousePathError(
            f"{path} resolves to {resolved}, outside the warehouse root "
            f"({parent}); no '..' and no links that leave it"
        )
    return resolved


def stage_version(
    root: Path, folder: Path, df: pl.DataFrame, compression: str, level: int | None
) -> tuple[Path, dict]:
    """Write ``df`` into ``folder/v-<sha16>/part-0.parquet`` (not yet published); returns the
    file and its manifest entry (path relative to ``root``, sha256, rows)."""
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
        version = inside(folder / f"{VERSION_PREFIX}{digest[:16]}", folder)
        version.mkdir(exist_ok=True)
        os.replace(tmp, version / DATA_FILE)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    rel = (version / DATA_FILE).relative_to(root).as_posix()
    return version / DATA_FILE, {"path": rel, "sha256": digest, "rows": df.height}


def sweep_versions(folder: Path, keep: str, grace: float = SWEEP_GRACE_SECONDS) -> None:
    """Remove the versions other than ``keep`` last touched more than ``grace`` seconds ago
    (a superseded version is touched when it is superseded: a reader that resolved the old
    manifest just before the switch still finds its file; D113), and the temporary files of
    writers that died. A superseded version stays until a write of the partition after its
    grace: at most one previous version per partition at rest."""
    cutoff = time.time() - grace
    for child in folder.iterdir():
        if (
            child.is_dir()
            and not child.is_symlink()
            and child.name.startswith(VERSION_PREFIX)
            and child.name != keep
            and child.stat().st_mtime < cutoff
        ):
            shutil.rmtree(child, ignore_errors=True)
        elif (pid := temp_name_pid(child.name)) is not None and not process_alive(pid):
            child.unlink(missing_ok=True)


def verified_file(root: Path, table: str, week: int | None, entry: dict) -> Path:
    """The file of a manifest ``entry`` once its checksum matches; CorruptPartitionError naming
    it when it is missing or differs."""
    path = inside(root / entry["path"], root)
    where = f"table {table}" + ("" if week is None else f", week {week}")
    try:
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns)
        if _VERIFIED.get(key) != entry["sha256"]:
            if sha256_of(path) != entry["sha256"]:
                raise CorruptPartitionError(
                    f"{path} ({where}): checksum differs from its manifest "
                    "(the file is damaged); re-materialize that partition"
                )
            _VERIFIED[key] = entry["sha256"]
    except FileNotFoundError as err:
        raise CorruptPartitionError(
            f"{path} ({where}): listed in its manifest but missing; re-materialize that partition"
        ) from err
    return path
