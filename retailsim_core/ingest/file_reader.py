"""Reading a week file's bytes safely: only once the file is complete, never past a bounded size,
and with every reader failure named with the file (D83).

- **Complete**: a file is read once it has not changed for ``settle_seconds`` (a copy in
  progress keeps touching it); a file still changing after ``wait_seconds`` is an error, and a
  file whose size or modification time changed while it was read is an error, so a week is
  never published from half a file. Writers that can should drop the file under another name
  (``transactions_200609.csv.part``: not a week file) and rename it when done.
- **Bounded**: the text of a week (decompressed for ``.gz``) may hold at most ``max_bytes``;
  a gzip file is decompressed in steps and refused as soon as it passes the bound, so a small
  ``.gz`` that expands to gigabytes costs at most the bound. No line may exceed
  ``MAX_LINE_BYTES`` (an LGSR line is about 200 bytes; a 1 GiB line made the CSV parser panic).
  Parsing holds the text and its frame: peak memory is about 7x the text of the weeks in flight.
"""

from __future__ import annotations

import gzip
import io
import os
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from retailsim_core.settings import Settings

MAX_LINE_BYTES = 1 << 20  # 1 MiB
STEP = 1 << 22  # decompression step, 4 MiB


class WeekFileError(ValueError):
    """A week file that cannot be ingested as a whole (the message names the file)."""


@dataclass(frozen=True)
class ReadLimits:
    settle_seconds: float = 0.0  # unchanged this long before it is read (0: read at once)
    wait_seconds: float = 60.0  # how long to wait for a changing file to settle
    max_bytes: int = 1 << 30  # text (decompressed) bytes of one week file, 1 GiB

    @classmethod
    def of(cls, settings: Settings) -> ReadLimits:
        """RETAILSIM_SETTLE_SECONDS and RETAILSIM_MAX_WEEK_FILE_MIB; a changing file is waited
        for ten times the settle time, at least a minute."""
        return cls(
            settle_seconds=float(settings.settle_seconds),
            wait_seconds=max(60.0, 10.0 * settings.settle_seconds),
            max_bytes=settings.max_week_file_mib << 20,
        )


def settled_stat(path: Path, limits: ReadLimits) -> os.stat_result:
    """The file's stat once it has not been modified for ``settle_seconds``."""
    deadline = time.monotonic() + limits.wait_seconds
    while True:
        st = path.stat()
        age = time.time() - st.st_mtime
        if age >= limits.settle_seconds:
            return st
        if time.monotonic() + limits.settle_seconds - age > deadline:
            raise WeekFileError(
                f"{path}: still being written (modified {max(age, 0.0):.1f} s ago; a week file "
                f"is read once unchanged for {limits.settle_seconds:g} s, waited "
                f"{limits.wait_seconds:g} s); run again when the copy is done"
            )
        time.sleep(min(limits.settle_seconds - age, 0.5))


def unchanged_since(path: Path, st: os.stat_result) -> None:
    now = path.stat()
    if (now.st_size, now.st_mtime_ns) != (st.st_size, st.st_mtime_ns):
        raise WeekFileError(
            f"{path}: changed while it was read ({st.st_size} -> {now.st_size} bytes); nothing "
            "of it is published; run again when the copy is done"
        )


def week_text(path: Path, st: os.stat_result, limits: ReadLimits) -> bytes | Path:
    """What the CSV reader reads: the path of a plain file (memory-mapped by the reader), the
    decompressed bytes of a ``.gz``; both checked against the size and line bounds."""
    if path.suffix.lower() != ".gz":
        if st.st_size > limits.max_bytes:
            raise _too_large(path, limits)
        if st.st_size:
            _check_lines(path, np.memmap(path, dtype=np.uint8, mode="r"))
        return path
    parts, total = [], 0
    try:
        with gzip.open(path, "rb") as fh:
            while chunk := fh.read(STEP):
                total += len(chunk)
                if total > limits.max_bytes:
                    raise _too_large(path, limits)
                parts.append(chunk)
    except (OSError, EOFError, zlib.error) as err:
        raise WeekFileError(
            f"{path}: cannot be read as gzip ({type(err).__name__}: {err})"
        ) from err
    text = b"".join(parts)
    _check_lines(path, np.frombuffer(text, dtype=np.uint8))
    return text


def _too_large(path: Path, limits: ReadLimits) -> WeekFileError:
    return WeekFileError(
        f"{path}: holds more than {limits.max_bytes:,} bytes of text (RETAILSIM_MAX_WEEK_FILE_MIB "
        "bounds a week file, and with it the memory of its ingestion)"
    )


def _check_lines(path: Path, data: np.ndarray) -> None:
    ends = np.flatnonzero(data == ord("\n"))
    starts = np.concatenate([[0], ends + 1])
    stops = np.concatenate([ends, [len(data)]])
    longest = int((stops - starts).max())
    if longest > MAX_LINE_BYTES:
        raise WeekFileError(
            f"{path}: has a line of {longest:,} bytes (at most {MAX_LINE_BYTES:,}; an LGSR line "
            "is about 200); not a week file, or a damaged one"
        )


def read_header(source: bytes | Path, path: Path) -> bytes:
    """The first line of the text, undecoded."""
    if isinstance(source, bytes):
        return source[: source.find(b"\n") if b"\n" in source else len(source)]
    with open(source, "rb") as fh:
        return fh.readline(MAX_LINE_BYTES + 1)


def read_csv_text(source: bytes | Path, path: Path) -> pl.DataFrame:
    """Every cell as text. Strict UTF-8 first; a file with invalid bytes is re-read with them
    replaced by U+FFFD, which no rule accepts, so those rows end in quarantine instead of
    failing the file. Any failure of the reader, a panic included, names the file.

    ``record_number`` counts CSV records with the header as record 1, so it equals the line
    number until a quoted field spans lines; after that it is the record's ordinal."""

    def read(encoding):
        data = io.BytesIO(source) if isinstance(source, bytes) else source
        return pl.read_csv(
            data,
            infer_schema=False,
            encoding=encoding,
            row_index_name="record_number",
            row_index_offset=2,
        )

    try:
        try:
            return read("utf8")
        except pl.exceptions.ComputeError as err:
            if "utf-8" not in str(err).lower():
                raise
            return read("utf8-lossy")
    # polars raises several types for malformed CSV, and a panic is not an Exception
    except (Exception, pl.exceptions.PanicException) as err:
        raise WeekFileError(f"{path}: cannot be read as CSV ({type(err).__name__}: {err})") from err
