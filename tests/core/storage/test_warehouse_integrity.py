"""A partition set is published by one rename and verified on read (issue: reliability 2, 4, 5, 6).

Each test reproduces a failure the earlier layout had: a kill between renames left a data file
beside another version's manifest, damaged bytes were read silently or without a file name, and
a symlinked week folder redirected writes outside the warehouse.
"""

from __future__ import annotations

import os
import subprocess
import sys

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import retailsim_core.storage.warehouse as warehouse_module
from retailsim_core.pipeline.data.ingest_weeks import ingest_weeks
from retailsim_core.storage.warehouse import CorruptPartitionError, Warehouse, WarehousePathError
from retailsim_core.tables import QUARANTINE_TABLE, RAW_TABLE

A = pl.Schema({"week": pl.Int16, "x": pl.Int64})
B = pl.Schema({"week": pl.Int16, "reason": pl.String})


def _frames(n: int) -> dict:
    return {
        "a": (pl.DataFrame({"week": [1] * n, "x": list(range(n))}, schema=A), A),
        "b": (pl.DataFrame({"week": [1], "reason": [f"old {n}"]}, schema=B), B),
    }


def _crash_on_primary_manifest(monkeypatch):
    """Die exactly where the old layout was torn: data written, the switch not yet made."""
    real = warehouse_module.atomic_write_text

    def write(text, path):
        if path.name == "_manifest.json" and path.parent.parent.name == "a":
            raise KeyboardInterrupt("killed before the switch")
        return real(text, path)

    monkeypatch.setattr(warehouse_module, "atomic_write_text", write)


def test_a_kill_before_the_switch_leaves_the_old_set_whole(tmp_path, monkeypatch):
    wh = Warehouse(tmp_path)
    wh.write_set(1, _frames(3), {"rows_read": 4})
    _crash_on_primary_manifest(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        wh.write_set(1, _frames(300), {"rows_read": 301})
    monkeypatch.undo()
    # Both tables and the manifest still describe the old version, consistently.
    assert wh.manifest("a", 1)["rows_read"] == 4
    assert wh.scan("a").collect().height == 3 and wh.manifest("a", 1)["rows"] == 3
    assert wh.scan("b").collect()["reason"].to_list() == ["old 3"]
    wh.write_set(1, _frames(300), {"rows_read": 301})  # the next write publishes and sweeps
    assert wh.scan("a").collect().height == 300
    assert wh.scan("b").collect()["reason"].to_list() == ["old 300"]
    # The superseded version stays readable for readers in flight, until a write after its grace.
    versions = sorted((tmp_path / "a" / "week=2006-04-10").glob("v-*"))
    assert len(versions) == 2
    for version in versions:
        os.utime(version, (0, 0))  # as if superseded long ago
    wh.write_set(1, _frames(300), {"rows_read": 301})
    assert len(list((tmp_path / "a" / "week=2006-04-10").glob("v-*"))) == 1


def test_a_first_write_killed_before_the_switch_is_invisible(tmp_path, monkeypatch):
    wh = Warehouse(tmp_path)
    _crash_on_primary_manifest(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        wh.write_set(1, _frames(5))
    monkeypatch.undo()
    assert wh.weeks("a") == [] and wh.data_file("a", 1) is None
    assert wh.scan("a", schema=A).collect().height == 0


def test_a_dead_writers_temporary_files_are_swept(tmp_path):
    wh = Warehouse(tmp_path)
    wh.write_set(1, _frames(2))
    folder = wh.partition_dir("a", 1)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    leftover = folder / f".staging.pid{dead}.abc123.tmp"
    live = folder / f".staging.pid{os.getpid()}.xyz789.tmp"  # a writer in progress: kept
    leftover.write_bytes(b"half")
    live.write_bytes(b"busy")
    wh.write_set(1, _frames(2))
    assert not leftover.exists() and live.exists()


@settings(max_examples=25, deadline=None)
@given(offset=st.integers(min_value=0, max_value=10_000), bit=st.integers(min_value=0, max_value=7))
def test_any_flipped_bit_is_an_error_naming_file_and_table(tmp_path_factory, offset, bit):
    wh = Warehouse(tmp_path_factory.mktemp("wh"))
    df = pl.DataFrame({"week": [1] * 500, "x": list(range(500))}, schema=A)
    path = wh.write_partition("a", 1, df, A)
    data = bytearray(path.read_bytes())
    data[offset % len(data)] ^= 1 << bit
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptPartitionError, match=rf"{path}.*table a, week 1.*checksum"):
        wh.scan("a").collect()


def test_xored_data_pages_of_a_raw_partition_name_the_file(tiny_dataset, tmp_path):
    wh = Warehouse(tmp_path)
    ingest_weeks(tiny_dataset["raw"], wh, [1])
    path = wh.data_file(RAW_TABLE, 1)
    data = bytearray(path.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 64):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptPartitionError, match=rf"{path} \(table raw_transactions, week 1\)"):
        wh.scan(RAW_TABLE).collect()


def test_a_symlinked_week_folder_cannot_redirect_writes_or_reads(tiny_dataset, tmp_path):
    wh = Warehouse(tmp_path / "wh")
    outside = tmp_path / "outside"
    outside.mkdir()
    table = tmp_path / "wh" / RAW_TABLE
    table.mkdir(parents=True)
    (table / "week=2006-04-10").symlink_to(outside, target_is_directory=True)
    with pytest.raises(WarehousePathError, match="outside the warehouse root"):
        ingest_weeks(tiny_dataset["raw"], wh, [1])
    assert list(outside.iterdir()) == []
    (outside / "_manifest.json").write_text('{"week": 1}')  # nor can it feed a read
    with pytest.raises(WarehousePathError):
        wh.weeks(RAW_TABLE)


def test_a_symlinked_folder_of_a_set_member_is_refused_before_publishing(tiny_dataset, tmp_path):
    wh = Warehouse(tmp_path / "wh")
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "wh" / QUARANTINE_TABLE).mkdir(parents=True)
    week_folder = tmp_path / "wh" / QUARANTINE_TABLE / "week=2006-04-10"
    week_folder.symlink_to(outside, target_is_directory=True)
    with pytest.raises(WarehousePathError):
        ingest_weeks(tiny_dataset["raw"], wh, [1])
    assert list(outside.iterdir()) == [] and wh.weeks(RAW_TABLE) == []


def test_a_manifest_of_the_older_layout_asks_for_a_rematerialization(tmp_path):
    folder = tmp_path / "a" / "week=2006-04-10"
    folder.mkdir(parents=True)
    (folder / "_manifest.json").write_text('{"table": "a", "week": 1, "rows": 1}')
    with pytest.raises(CorruptPartitionError, match="older RetailSim warehouse layout"):
        Warehouse(tmp_path).scan("a").collect()
