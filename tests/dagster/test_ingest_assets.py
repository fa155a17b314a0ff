"""Materialize the ingest domain in process, over one week and over a range."""

import dagster as dg
import polars as pl
import pytest

from retailsim_core.ingest.lgsr import RAW_TRANSACTIONS_SCHEMA
from retailsim_core.storage.warehouse import Warehouse
from retailsim_dagster.assets.raw_transactions import raw_transactions
from retailsim_dagster.resources import RawSourceResource, WarehouseResource


def _resources(tiny_dataset, tmp_path):
    return {
        "raw_source": RawSourceResource(raw_dir=str(tiny_dataset["raw"])),
        "warehouse": WarehouseResource(root=str(tmp_path / "wh")),
    }


def _own_raw(raw, tmp_path):
    return {
        "raw_source": RawSourceResource(raw_dir=str(raw)),
        "warehouse": WarehouseResource(root=str(tmp_path / "wh")),
    }


def _checks(result):
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_materialize_one_week(tiny_dataset, tmp_path):
    result = dg.materialize(
        [raw_transactions], partition_key="2006-04-10", resources=_resources(tiny_dataset, tmp_path)
    )
    assert result.success
    mats = {
        m.asset_key.to_user_string(): m
        for m in result.asset_materializations_for_node("raw_transactions")
    }
    meta = mats["raw_transactions"].metadata
    assert meta["rows_read"].value == meta["rows_kept"].value + meta["rows_rejected"].value > 0
    checks = _checks(result)
    assert (
        checks["row_accounting"].passed
        and checks["schema"].passed
        and checks["week_file_present"].passed
    )
    df = Warehouse(tmp_path / "wh").scan("raw_transactions").collect()
    assert df.schema == RAW_TRANSACTIONS_SCHEMA and df["week"].unique().to_list() == [1]


def test_materialize_a_range_in_one_run_with_a_missing_week(tiny_dataset, tmp_path):
    result = dg.materialize(
        [raw_transactions],
        resources=_resources(tiny_dataset, tmp_path),
        tags={
            "dagster/asset_partition_range_start": "2006-04-10",
            "dagster/asset_partition_range_end": "2006-05-15",
        },
    )
    assert result.success
    checks = _checks(result)
    missing = checks["week_file_present"]
    assert not missing.passed and missing.severity == dg.AssetCheckSeverity.WARN
    assert "transactions_200610.csv[.gz]" in str(missing.metadata["missing_files"].value)
    wh = Warehouse(tmp_path / "wh")
    assert wh.weeks("raw_transactions") == [1, 2, 3, 4, 5, 6] and wh.missing_weeks(
        "raw_transactions"
    ) == [4]
    assert wh.scan("raw_transactions").select(pl.col("week").n_unique()).collect().item() == 5


def test_a_raw_folder_that_does_not_exist_fails_at_start_and_keeps_the_data(tiny_dataset, tmp_path):
    good = _resources(tiny_dataset, tmp_path)
    assert dg.materialize([raw_transactions], partition_key="2006-04-10", resources=good).success
    before = Warehouse(tmp_path / "wh").manifest("raw_transactions", 1)
    wrong = {**good, "raw_source": RawSourceResource(raw_dir=str(tmp_path / "no_such_folder"))}
    result = dg.materialize(
        [raw_transactions], partition_key="2006-04-10", resources=wrong, raise_on_error=False
    )
    assert not result.success
    assert "does not exist" in str(result.get_step_failure_events()[0].event_specific_data.error)
    assert Warehouse(tmp_path / "wh").manifest("raw_transactions", 1) == before


@pytest.mark.slow
def test_a_vanished_week_file_never_empties_its_partition_unless_asked(tiny_dataset, tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for src in tiny_dataset["raw"].glob("transactions_20060[78].csv*"):
        (raw / src.name).write_bytes(src.read_bytes())
    res = _own_raw(raw, tmp_path)
    assert dg.materialize([raw_transactions], partition_key="2006-04-10", resources=res).success
    rows = Warehouse(tmp_path / "wh").manifest("raw_transactions", 1)["rows"]
    next(raw.glob("transactions_200607.csv*")).unlink()
    result = dg.materialize(
        [raw_transactions], partition_key="2006-04-10", resources=res, raise_on_error=False
    )
    assert not result.success
    assert "no longer" in str(result.get_step_failure_events()[0].event_specific_data.error)
    assert Warehouse(tmp_path / "wh").manifest("raw_transactions", 1)["rows"] == rows > 0
    asked = {**res, "raw_source": RawSourceResource(raw_dir=str(raw), replace_vanished_weeks=True)}
    assert dg.materialize([raw_transactions], partition_key="2006-04-10", resources=asked).success
    assert Warehouse(tmp_path / "wh").manifest("raw_transactions", 1)["status"] == "missing"


@pytest.mark.slow
def test_a_week_whose_rows_are_all_quarantined_fails_the_share_check(tiny_dataset, tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    src = next(tiny_dataset["raw"].glob("transactions_200607.csv"))
    lines = src.read_text().splitlines()
    # Every SHOP_DATE moved out of the week: each row is valid text, none belongs to the week.
    date = lines[0].split(",").index("SHOP_DATE")
    moved = [
        ",".join("20050101" if i == date else v for i, v in enumerate(line.split(",")))
        for line in lines[1:]
    ]
    (raw / src.name).write_text("\n".join([lines[0], *moved]) + "\n")
    res = _own_raw(raw, tmp_path)
    result = dg.materialize([raw_transactions], partition_key="2006-04-10", resources=res)
    checks = _checks(result)
    assert checks["row_accounting"].passed
    share = checks["quarantine_share"]
    assert not share.passed and share.severity == dg.AssetCheckSeverity.ERROR
    assert share.metadata["weeks_over"].value == [1] and share.metadata["worst_share"].value == 1.0
    clean = dg.materialize(
        [raw_transactions],
        partition_key="2006-04-17",
        resources=_resources(tiny_dataset, tmp_path / "clean"),
    )
    assert _checks(clean)["quarantine_share"].passed


def test_a_reversed_partition_range_fails_naming_the_range(tiny_dataset, tmp_path):
    """End first is a mistake, not an empty request: a green run that ingests nothing and
    passes its accounting would hide it."""
    result = dg.materialize(
        [raw_transactions],
        resources=_resources(tiny_dataset, tmp_path),
        tags={
            "dagster/asset_partition_range_start": "2006-05-15",
            "dagster/asset_partition_range_end": "2006-04-10",
        },
        raise_on_error=False,
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "2006-05-15...2006-04-10 holds no week" in str(failure.step_failure_data.error)
