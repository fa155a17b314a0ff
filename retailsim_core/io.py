"""Atomic file writes: write a temporary sibling, fsync, then rename over the target.

A reader never sees a half-written file, and a crash leaves the previous version intact.
"""

from __future__ import annotations

import gzip
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import polars as pl


def atomic_write(path: Path, write: Callable[[Path], None]) -> Path:
    """Run ``write(tmp)`` on a temporary sibling of ``path``, fsync it, then rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; published files are world-readable
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_parquet(df: pl.DataFrame, path: Path, compression: str = "zstd") -> Path:
    # Statistics on, no per-write metadata that varies: same frame, same bytes.
    return atomic_write(path, lambda tmp: df.write_parquet(tmp, compression=compression, statistics=True))


def atomic_write_bytes(data: bytes, path: Path) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_bytes(data))


def atomic_write_text(text: str, path: Path) -> Path:
    return atomic_write_bytes(text.encode("utf-8"), path)


def gzip_bytes(data: bytes) -> bytes:
    """Deterministic gzip: no file name and a zero timestamp in the header."""
    return gzip.compress(data, compresslevel=6, mtime=0)
