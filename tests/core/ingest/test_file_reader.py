"""Week files are read only once complete and only within bounds: a file still being copied, a
gzip bomb, a monstrous line or a panicking parser is an error naming the file, never a partial
or unbounded ingestion."""

from __future__ import annotations

import gzip
import shutil
import threading
import time
import tracemalloc

import polars as pl
import pytest

from retailsim_core.ingest import file_reader, week_file
from retailsim_core.ingest.file_reader import ReadLimits, WeekFileError
from retailsim_core.ingest.lgsr import FULL_HEADER
from retailsim_core.ingest.week_file import ingest_week
from retailsim_core.settings import load_settings

WEEK = 3
NAME = "transactions_200609.csv"


def _source(tiny_dataset) -> bytes:
    return (tiny_dataset["raw"] / NAME).read_bytes()


def _write_slowly(path, data: bytes, parts: int, pause: float) -> None:
    step = -(-len(data) // parts)
    with open(path, "wb") as fh:
        for i in range(0, len(data), step):
            fh.write(data[i : i + step])
            fh.flush()
            time.sleep(pause)


def test_a_file_being_written_is_read_only_once_complete(tiny_dataset, tmp_path):
    (tmp_path / "raw").mkdir()
    data = _source(tiny_dataset)
    whole = ingest_week(tiny_dataset["raw"], WEEK).rows_read
    writer = threading.Thread(target=_write_slowly, args=(tmp_path / "raw" / NAME, data, 5, 0.3))
    writer.start()
    while not (tmp_path / "raw" / NAME).exists():
        time.sleep(0.01)
    result = ingest_week(tmp_path / "raw", WEEK, ReadLimits(settle_seconds=1.0, wait_seconds=30))
    writer.join()
    assert result.rows_read == whole  # not the rows of the part written when the run began


def test_a_file_that_keeps_changing_is_an_error_not_a_partial_week(tiny_dataset, tmp_path):
    (tmp_path / "raw").mkdir()
    data = _source(tiny_dataset)
    writer = threading.Thread(target=_write_slowly, args=(tmp_path / "raw" / NAME, data, 12, 0.25))
    writer.start()
    while not (tmp_path / "raw" / NAME).exists():
        time.sleep(0.01)
    with pytest.raises(WeekFileError, match=rf"{NAME}: still being written"):
        ingest_week(tmp_path / "raw", WEEK, ReadLimits(settle_seconds=1.0, wait_seconds=1.5))
    writer.join()


def test_a_file_that_changes_while_it_is_read_is_an_error(tiny_dataset, tmp_path, monkeypatch):
    (tmp_path / "raw").mkdir()
    path = shutil.copy(tiny_dataset["raw"] / NAME, tmp_path / "raw" / NAME)
    hash_then_grow = week_file.sha256_of

    def grows(p):
        digest = hash_then_grow(p)
        with open(path, "ab") as fh:  # the copy goes on after the reader's stat
            fh.write(b"\n")
        return digest

    monkeypatch.setattr(week_file, "sha256_of", grows)
    with pytest.raises(WeekFileError, match=rf"{NAME}: changed while it was read"):
        ingest_week(tmp_path / "raw", WEEK)


def _bomb(path, megabytes: int) -> None:
    line = ",".join(["1"] * len(FULL_HEADER)).encode() + b"\n"
    block = line * ((1 << 20) // len(line))
    with gzip.open(path, "wb", compresslevel=1) as fh:
        fh.write(",".join(FULL_HEADER).encode() + b"\n")
        for _ in range(megabytes):
            fh.write(block)


def test_a_gzip_bomb_is_refused_within_the_bound(tmp_path):
    """256 MiB of rows in a small .gz: refused past the bound, having held about the bound."""
    (tmp_path / "raw").mkdir()
    path = tmp_path / "raw" / f"{NAME}.gz"
    _bomb(path, 256)
    assert path.stat().st_size < 4 << 20
    tracemalloc.start()
    try:
        with pytest.raises(WeekFileError, match=rf"{NAME}\.gz: holds more than 8,388,608 bytes"):
            ingest_week(tmp_path / "raw", WEEK, ReadLimits(max_bytes=8 << 20))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20


def test_a_plain_file_past_the_bound_is_refused_unread(tiny_dataset, tmp_path):
    (tmp_path / "raw").mkdir()
    shutil.copy(tiny_dataset["raw"] / NAME, tmp_path / "raw" / NAME)
    with pytest.raises(WeekFileError, match=rf"{NAME}: holds more than 1,000 bytes"):
        ingest_week(tmp_path / "raw", WEEK, ReadLimits(max_bytes=1000))


@pytest.mark.parametrize("compress", [False, True])
def test_a_monstrous_line_is_refused_naming_the_file(tmp_path, compress):
    (tmp_path / "raw").mkdir()
    data = ",".join(FULL_HEADER).encode() + b"\n" + b"9" * (file_reader.MAX_LINE_BYTES + 1)
    path = tmp_path / "raw" / (NAME + (".gz" if compress else ""))
    path.write_bytes(gzip.compress(data, 1) if compress else data)
    with pytest.raises(WeekFileError, match=rf"{path.name}: has a line of 1,048,577 bytes"):
        ingest_week(tmp_path / "raw", WEEK)


def test_a_panic_of_the_csv_reader_names_the_file(tiny_dataset, tmp_path, monkeypatch):
    """A polars panic is a BaseException, not an Exception: it escaped the handler."""
    (tmp_path / "raw").mkdir()
    shutil.copy(tiny_dataset["raw"] / NAME, tmp_path / "raw" / NAME)

    def panics(*args, **kwargs):
        raise pl.exceptions.PanicException("capacity overflow")

    monkeypatch.setattr(file_reader.pl, "read_csv", panics)
    with pytest.raises(WeekFileError, match=rf"{NAME}: cannot be read as CSV \(PanicException"):
        ingest_week(tmp_path / "raw", WEEK)


def test_the_limits_come_from_the_settings():
    limits = ReadLimits.of(
        load_settings({"RETAILSIM_SETTLE_SECONDS": "3", "RETAILSIM_MAX_WEEK_FILE_MIB": "16"})
    )
    assert limits == ReadLimits(settle_seconds=3.0, wait_seconds=60.0, max_bytes=16 << 20)
    default = ReadLimits.of(load_settings({}))
    assert default.settle_seconds == 2.0 and default.max_bytes == 1 << 30
