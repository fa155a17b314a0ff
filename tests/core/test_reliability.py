"""Reliability and safety: garbage input, crashes mid-write, concurrent writers, damaged files,
path escapes, and no unsafe deserialisation anywhere in the code."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from retailsim_core.ingest.lgsr import FULL_HEADER
from retailsim_core.ingest.week_file import LGSRFileError, ingest_week
from retailsim_core.pipeline.data.ingest_weeks import ingest_weeks
from retailsim_core.storage.warehouse import LOCK_FILE, CorruptPartitionError, Warehouse
from retailsim_core.tables import RAW_TABLE

ROOT = Path(__file__).resolve().parents[2]
WEEK = 1
FILE = "transactions_200607.csv"

cells = st.one_of(
    st.text(alphabet=st.sampled_from(list('abcXYZ019.,-" \t;\n\u00e9\x00')), max_size=12),
    st.sampled_from(["PRD0900001", "200607", "20060410", "1", "-1", "Top Up", "LA", ""]),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@example(rows=[], header=False, raw_bytes=b"\xc2\x80\r\x00", use_bytes=True)  # bare CR in header
@given(
    rows=st.lists(st.lists(cells, min_size=0, max_size=25), max_size=8),
    header=st.booleans(),
    raw_bytes=st.binary(max_size=200),
    use_bytes=st.booleans(),
)
def test_garbage_files_end_in_a_clear_error_or_in_accounted_rows(
    tmp_path_factory, rows, header, raw_bytes, use_bytes
):
    raw = tmp_path_factory.mktemp("garbage")
    if use_bytes:
        (raw / FILE).write_bytes(raw_bytes)
    else:
        lines = ([",".join(FULL_HEADER)] if header else []) + [",".join(r) for r in rows]
        (raw / FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        result = ingest_week(raw, WEEK)
    except LGSRFileError as err:
        assert FILE in str(err)
        return
    assert result.rows_read == result.kept.height + result.quarantine.height
    assert (result.quarantine["reason"].str.len_chars() > 0).all()


def test_crash_mid_write_leaves_no_partial_partition(tiny_dataset, tmp_path, monkeypatch):
    wh = Warehouse(tmp_path / "wh")
    ingest_weeks(tiny_dataset["raw"], wh, [1])
    good = wh.data_file(RAW_TABLE, 1).read_bytes()

    def broken_write(self, file, **kwargs):
        Path(file).write_bytes(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", broken_write)
    with pytest.raises(OSError, match="disk full"):
        ingest_weeks(tiny_dataset["raw"], wh, [1, 2])
    monkeypatch.undo()
    # The old partition is intact, the new one was never published, no temp file is visible.
    assert wh.data_file(RAW_TABLE, 1).read_bytes() == good
    assert wh.data_file(RAW_TABLE, 2) is None
    assert wh.scan(RAW_TABLE).collect().height > 0
    ingest_weeks(tiny_dataset["raw"], wh, [1, 2])  # the re-run succeeds
    assert wh.data_file(RAW_TABLE, 1).read_bytes() == good


@pytest.mark.slow
def test_killed_run_leaves_readable_partitions_and_rerun_is_identical(tiny_dataset, tmp_path):
    wh_dir = tmp_path / "killed"
    code = (
        "import sys, time, polars as pl\n"
        "from pathlib import Path\n"
        "from retailsim_core.pipeline.data.ingest_weeks import ingest_weeks\n"
        "from retailsim_core.storage.warehouse import Warehouse\n"
        "orig = pl.DataFrame.write_parquet\n"
        "def slow(self, *a, **k):\n    time.sleep(0.05); return orig(self, *a, **k)\n"
        "pl.DataFrame.write_parquet = slow\n"
        f"ingest_weeks(Path({str(tiny_dataset['raw'])!r}), Warehouse(Path({str(wh_dir)!r})), "
        "range(1, 15))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    deadline = time.time() + 60

    def published():
        return len(list(wh_dir.glob("raw_transactions/week=*/_manifest.json")))

    while time.time() < deadline and published() < 3:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    wh = Warehouse(wh_dir)
    written = wh.weeks(RAW_TABLE)
    assert written and len(written) < 14  # it really died mid-way
    for week in written:  # every published partition is whole
        rows = wh.manifest(RAW_TABLE, week)["rows"]
        assert pl.read_parquet(wh.data_file(RAW_TABLE, week)).height == rows
    ingest_weeks(tiny_dataset["raw"], wh, range(1, 15))
    clean = Warehouse(tmp_path / "clean")
    ingest_weeks(tiny_dataset["raw"], clean, range(1, 15))
    for week in range(1, 15):
        a = wh.data_file(RAW_TABLE, week).read_bytes()
        assert a == clean.data_file(RAW_TABLE, week).read_bytes()


def test_concurrent_writers_of_one_partition_do_not_corrupt_it(tiny_dataset, tmp_path):
    wh = Warehouse(tmp_path / "wh")
    reference = Warehouse(tmp_path / "ref")
    ingest_weeks(tiny_dataset["raw"], reference, [3])
    errors = []

    def writer():
        try:
            for _ in range(5):
                ingest_weeks(tiny_dataset["raw"], wh, [3])
        except Exception as err:
            errors.append(err)

    threads = [threading.Thread(target=writer) for _ in range(3)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors
    expected = reference.data_file(RAW_TABLE, 3).read_bytes()
    assert wh.data_file(RAW_TABLE, 3).read_bytes() == expected
    left = [p.name for p in wh.partition_dir(RAW_TABLE, 3).glob(".*")]
    assert left == [LOCK_FILE]  # no temp files left behind; the writers' lock stays


def test_damaged_parquet_file_is_named(tiny_dataset, tmp_path):
    wh = Warehouse(tmp_path / "wh")
    ingest_weeks(tiny_dataset["raw"], wh, [1, 2])
    damaged = wh.data_file(RAW_TABLE, 2)
    damaged.write_bytes(damaged.read_bytes()[:100])
    with pytest.raises(CorruptPartitionError, match=re.escape(str(damaged))):
        wh.scan(RAW_TABLE).collect()


@pytest.mark.parametrize("table", ["../outside", "/etc", "a/../../b", "."])
def test_table_paths_cannot_escape_the_warehouse(tmp_path, table):
    with pytest.raises(ValueError, match="outside the warehouse root"):
        Warehouse(tmp_path / "wh").table_dir(table)


UNSAFE = re.compile(
    r"\b(pickle|cPickle|dill|marshal|shelve|cloudpickle|joblib)\b|(?<![.\w])(eval|exec)\(|allow_pickle\s*=\s*True"
)  # model.eval() is fine


def test_no_unsafe_deserialisation_in_the_code():
    assert (
        UNSAFE.search("x = pickle.loads(blob)")
        and UNSAFE.search("eval(text)")
        and UNSAFE.search("np.load(f, allow_pickle=True)")
    )
    assert not UNSAFE.search("model.eval()")
    offenders = []
    for path in (
        list((ROOT / "retailsim_core").rglob("*.py"))
        + list((ROOT / "retailsim_dagster").rglob("*.py"))
        + list((ROOT / "benchmarks").rglob("*.py"))
    ):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if UNSAFE.search(line) or ("torch.load(" in line and "weights_only=True" not in line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, offenders
