"""A partition folder means one partition (D113): copies and strays beside the partitions are
never read, a manifest that disagrees with its folder is named, and concurrent writers and
readers of one partition never see a false "damaged"."""

import json
import logging
import multiprocessing as mp
import shutil

import duckdb
import polars as pl
import pytest

from retailsim_core.storage.warehouse import CorruptPartitionError, Warehouse

SCHEMA = pl.Schema({"week": pl.Int16, "x": pl.Int64})


def _frame(week: int, n: int = 3, offset: int = 0) -> pl.DataFrame:
    return pl.DataFrame({"week": [week] * n, "x": list(range(offset, offset + n))}, schema=SCHEMA)


@pytest.fixture()
def wh(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    for week in (1, 2):
        wh.write_partition("t", week, _frame(week), SCHEMA)
    return wh


def test_a_backup_copy_beside_a_partition_is_not_read(wh, caplog):
    folder = wh.partition_dir("t", 1)
    shutil.copytree(folder, folder.with_name(folder.name + ".bak"))
    with caplog.at_level(logging.WARNING):
        assert wh.weeks("t") == [1, 2]
        assert wh.scan("t").collect().height == 6  # not 9: week 1 counted once
    assert "week=2006-04-10.bak not read: not a partition folder" in caplog.text
    assert caplog.text.count("not a partition folder") == 1  # named once, not at every read


def test_a_stray_folder_with_an_empty_manifest_is_not_a_partition(wh):
    stray = wh.table_dir("t") / "week=junk"
    stray.mkdir()
    (stray / "_manifest.json").write_text("{}")
    assert wh.weeks("t") == [1, 2] and wh.scan("t").collect().height == 6


def test_a_manifest_naming_another_week_is_named(wh):
    manifest = wh.partition_dir("t", 2) / "_manifest.json"
    body = json.loads(manifest.read_text())
    manifest.write_text(json.dumps(body | {"week": 1}))
    with pytest.raises(
        CorruptPartitionError, match="names week 1 but lies in the folder of week 2"
    ):
        wh.weeks("t")
    manifest.write_text("{")
    with pytest.raises(CorruptPartitionError, match=str(manifest)):
        wh.weeks("t")


def test_the_documented_duckdb_query_reads_the_files_week_not_the_folders(wh):
    """docs/operations.md reads through ``Warehouse.files`` with Hive partitioning off: the
    ``week`` column is the file's week number, not the folder's date."""
    files = [str(p) for p in wh.files("t")]
    rows = duckdb.sql(
        f"select week, count(*) as n from read_parquet({files}, hive_partitioning = false) "
        "group by all order by 1"
    ).fetchall()
    assert rows == [(1, 3), (2, 3)]


def _publish(root: str, seed: int, rounds: int) -> None:
    wh = Warehouse(root)
    for i in range(rounds):
        wh.write_partition("t", 1, _frame(1, 200, offset=seed * 1000 + i), SCHEMA)


def _read(root: str, rounds: int, errors) -> None:
    wh = Warehouse(root)
    for _ in range(rounds):
        try:
            frame = wh.scan("t", [1]).collect()
            assert frame.height == 200
        except Exception as err:  # noqa: BLE001 - every failure is a finding
            errors.put(f"{type(err).__name__}: {err}")


def test_concurrent_writers_and_readers_of_one_partition(tmp_path):
    """Four processes republish one partition while two read it: no writer crashes, no read
    says "damaged", and the partition ends whole (one writer's frame)."""
    root = tmp_path / "wh"
    Warehouse(root).write_partition("t", 1, _frame(1, 200), SCHEMA)
    ctx = mp.get_context("spawn")  # polars is not fork-safe
    errors = ctx.Queue()
    writers = [ctx.Process(target=_publish, args=(str(root), s, 15)) for s in range(4)]
    readers = [ctx.Process(target=_read, args=(str(root), 60, errors)) for _ in range(2)]
    for p in writers + readers:
        p.start()
    for p in writers + readers:
        p.join(120)
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert [p.exitcode for p in writers + readers] == [0] * 6 and found == []
    final = Warehouse(root).scan("t", [1]).collect()
    assert final.height == 200 and final["x"].is_sorted()
