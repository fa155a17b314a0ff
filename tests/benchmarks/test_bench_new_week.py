"""The new-week benchmark's world before the week: no partition of it or later, the original
warehouse and raw folder untouched, and the sensor requesting exactly the landed week."""

import os
import shutil
import time

import pytest

from benchmarks.bench_new_week import raw_before, sensor_request, world_before
from retailsim_core.calendar import LGSR, week_key_of
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import PRICES_TABLE, RAW_TABLE, REFRESH_TABLE


def test_the_world_before_a_week_has_no_partition_of_it_or_later(tiny_warehouse, tmp_path):
    wh = tiny_warehouse["warehouse"]
    before = {t: wh.weeks(t) for t in (RAW_TABLE, PRICES_TABLE)}
    copy = Warehouse(world_before(wh.root, 9, tmp_path, LGSR), calendar=LGSR)
    for table, weeks in before.items():
        assert copy.weeks(table) == [w for w in weeks if w < 9]
        assert wh.weeks(table) == weeks  # the original keeps every week
    # Hard links: the same bytes, not copies; the original's partition of week 9 is whole.
    # A published model's folder (no table manifest) of the week or later goes too.
    model = wh.partition_dir(REFRESH_TABLE, 10)
    model.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"weights")
    copy = Warehouse(world_before(wh.root, 9, tmp_path / "again", LGSR), calendar=LGSR)
    assert not copy.partition_dir(REFRESH_TABLE, 10).exists() and model.exists()
    shutil.rmtree(model)
    kept = copy.data_file(RAW_TABLE, 8)
    assert os.path.samefile(kept, wh.data_file(RAW_TABLE, 8))
    assert wh.data_file(RAW_TABLE, 9).exists()


def test_the_landed_file_is_the_one_week_the_sensor_requests(tiny_dataset, tmp_path, monkeypatch):
    raw, week_file = raw_before(tiny_dataset["raw"], 6, tmp_path)
    assert week_file is not None and not (raw / week_file.name).exists()
    monkeypatch.setenv("RETAILSIM_RAW_DIR", str(raw))
    seen, cursor = sensor_request(None)  # the earlier files, as a daemon saw them
    assert week_key_of(6) not in seen and len(seen) > 0
    landed = raw / week_file.name
    shutil.copyfile(week_file, landed)
    # Within the settle time: perhaps still copying. A long one, so that a slow tick on a busy
    # machine does not outlast it (the default 2 s did once, beside other tests).
    monkeypatch.setenv("RETAILSIM_SETTLE_SECONDS", "600")
    assert sensor_request(cursor)[0] == []
    monkeypatch.delenv("RETAILSIM_SETTLE_SECONDS")
    os.utime(landed, (time.time() - 30, time.time() - 30))
    assert sensor_request(cursor)[0] == [week_key_of(6)]
    assert (tiny_dataset["raw"] / week_file.name).exists()  # the source folder is untouched


def test_a_week_without_a_file_is_refused(tiny_dataset, tmp_path):
    with pytest.raises(SystemExit, match="no week file of week 4"):
        raw_before(tiny_dataset["raw"], 4, tmp_path)  # the tiny dataset leaves week 4 out
