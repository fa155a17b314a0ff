"""A run with an unknown or impossible setting fails when its resources are set up, before any
work, naming the setting (issue #21 item 1)."""

import dagster as dg

from retailsim_core.storage.warehouse import Warehouse
from retailsim_dagster.assets.raw_transactions import raw_transactions
from retailsim_dagster.resources import RawSourceResource, WarehouseResource


def _run(tiny_dataset, tmp_path, **raw):
    resources = {
        "raw_source": RawSourceResource(raw_dir=str(tiny_dataset["raw"]), **raw),
        "warehouse": WarehouseResource(root=str(tmp_path / "wh")),
    }
    return dg.materialize(
        [raw_transactions], partition_key="2006-04-10", resources=resources, raise_on_error=False
    )


def _error(result) -> str:
    return "\n".join(
        str(e.event_specific_data.error)
        for e in result.all_events
        if e.is_failure
        and e.event_specific_data is not None
        and getattr(e.event_specific_data, "error", None) is not None
    )


def test_a_misspelt_setting_fails_the_run_before_anything_is_written(
    tiny_dataset, tmp_path, monkeypatch
):
    monkeypatch.setenv("RETAILSIM_RAW_DIRS", "/somewhere")
    result = _run(tiny_dataset, tmp_path)
    assert not result.success
    assert "RETAILSIM_RAW_DIRS" in _error(result) and "RETAILSIM_RAW_DIR?" in _error(result)
    assert Warehouse(tmp_path / "wh").weeks("raw_transactions") == []


def test_a_truth_folder_that_does_not_exist_fails_the_run_at_start(
    tiny_dataset, tmp_path, monkeypatch
):
    result = _run(tiny_dataset, tmp_path, truth_dir=str(tmp_path / "no_truth"))
    assert not result.success and "truth_dir" in _error(result)
    monkeypatch.setenv("RETAILSIM_TRUTH_DIR", str(tmp_path / "no_truth"))
    result = _run(tiny_dataset, tmp_path)
    assert not result.success and "RETAILSIM_TRUTH_DIR" in _error(result)
    assert Warehouse(tmp_path / "wh").weeks("raw_transactions") == []
    monkeypatch.delenv("RETAILSIM_TRUTH_DIR")
    assert _run(tiny_dataset, tmp_path, truth_dir=str(tiny_dataset["truth"])).success
