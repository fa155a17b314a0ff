"""Atomic file writes: write a temporary sibling, fsync, then rename over the target.

A reader never sees a half-written file, and a crash leaves the previous version intact.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import polars as pl

TEMP_NAME = re.compile(r"^\..*\.pid(\d+)\.[^.]*\.tmp$")


def sha256_of(path: Path) -> str:
    """The file's sha256, streamed (hashlib releases the GIL while hashing)."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def process_alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def temp_name_pid(name: str) -> int | None:
    """The writer's process id in a temporary file's name (None for other names)."""
    m = TEMP_NAME.match(name)
    return int(m.group(1)) if m else None


def write_temp(folder: Path, name: str, write: Callable[[Path], None]) -> Path:
    """Run ``write(tmp)`` on a fresh hidden temporary file in ``folder`` and fsync it.

    The name carries the writer's pid, so a later writer can tell a dead process's leftover
    from a live writer's file in progress."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.pid{os.getpid()}.", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; published files are world-readable
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def atomic_write(path: Path, write: Callable[[Path], None]) -> Path:
    """Run ``write(tmp)`` on a temporary sibling of ``path``, fsync it, rename it over ``path``."""
    path = Path(path)
    tmp = write_temp(path.parent, path.name, write)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def atomic_write_parquet(df: pl.DataFrame, path: Path, compression: str = "zstd") -> Path:
    # Statistics on, no per-write metadata that varies: same frame, same bytes.
    return atomic_write(
        path, lambda tmp: df.write_parquet(tmp, compression=compression, statistics=True)
    )


def atomic_write_bytes(data: bytes, path: Path) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_bytes(data))


def atomic_write_text(text: str, path: Path) -> Path:
    return atomic_write_bytes(text.encode("utf-8"), path)


def gzip_bytes(data: bytes) -> bytes:
    """Deterministic gzip: no file name and a zero timestamp in the header."""
    return gzip.compress(data, compresslevel=6, mtime=0)
