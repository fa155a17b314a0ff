"""Materialize the ingest domain in process, over one week and over a range."""

import dagster as dg
import polars as pl

from retailsim_core.lgsr import RAW_TRANSACTIONS_SCHEMA
from retailsim_core.warehouse import Warehouse
from retailsim_dagster.assets.ingest import raw_transactions
from retailsim_dagster.resources import RawSourceResource, WarehouseResource


def _resources(tiny_dataset, tmp_path):
    return {"raw_source": RawSourceResource(raw_dir=str(tiny_dataset["raw"])),
            "warehouse": WarehouseResource(root=str(tmp_path / "wh"))}


def _checks(result):
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_materialize_one_week(tiny_dataset, tmp_path):
    result = dg.materialize([raw_transactions], partition_key="2006-04-10",
                            resources=_resources(tiny_dataset, tmp_path))
    assert result.success
    mats = {m.asset_key.to_user_string(): m for m in result.asset_materializations_for_node("raw_transactions")}
    meta = mats["raw_transactions"].metadata
    assert meta["rows_read"].value == meta["rows_kept"].value + meta["rows_rejected"].value > 0
    checks = _checks(result)
    assert checks["row_accounting"].passed and checks["schema"].passed and checks["week_file_present"].passed
    df = Warehouse(tmp_path / "wh").scan("raw_transactions").collect()
    assert df.schema == RAW_TRANSACTIONS_SCHEMA and df["week"].unique().to_list() == [1]


def test_materialize_a_range_in_one_run_with_a_missing_week(tiny_dataset, tmp_path):
    result = dg.materialize(
        [raw_transactions], resources=_resources(tiny_dataset, tmp_path),
        tags={"dagster/asset_partition_range_start": "2006-04-10",
              "dagster/asset_partition_range_end": "2006-05-15"})
    assert result.success
    checks = _checks(result)
    missing = checks["week_file_present"]
    assert not missing.passed and missing.severity == dg.AssetCheckSeverity.WARN
    assert "transactions_200610.csv[.gz]" in str(missing.metadata["missing_files"].value)
    wh = Warehouse(tmp_path / "wh")
    assert wh.weeks("raw_transactions") == [1, 2, 3, 4, 5, 6] and wh.missing_weeks("raw_transactions") == [4]
    assert wh.scan("raw_transactions").select(pl.col("week").n_unique()).collect().item() == 5
