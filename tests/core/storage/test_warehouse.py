import polars as pl
import pytest

from retailsim_core.pipeline.data.ingest_weeks import ingest_weeks
from retailsim_core.storage.warehouse import StaleSchemaError, Warehouse
from retailsim_core.tables import QUARANTINE_TABLE, RAW_TABLE

SCHEMA = pl.Schema({"week": pl.Int16, "x": pl.Int64})


def test_rewriting_a_partition_is_idempotent(tmp_path):
    wh = Warehouse(tmp_path)
    df = pl.DataFrame({"week": [2, 2], "x": [1, 2]}, schema=SCHEMA)
    path = wh.write_partition("t", 2, df, SCHEMA, {"status": "ok"})
    first = path.read_bytes()
    wh.write_partition("t", 2, df, SCHEMA, {"status": "ok"})
    assert path.read_bytes() == first
    assert path.parent.parent.name == "week=2006-04-17"
    assert not list(path.parent.glob(".*tmp"))  # no temp files left behind
    assert wh.manifest("t", 2)["rows"] == 2


def test_schema_mismatch_is_refused(tmp_path):
    with pytest.raises(ValueError, match="schema"):
        Warehouse(tmp_path).write_partition("t", 1, pl.DataFrame({"x": [1]}), SCHEMA)


def test_scan_reads_weeks_and_skips_absent_ones(tmp_path):
    wh = Warehouse(tmp_path)
    for w in (1, 3):
        wh.write_partition(
            "t", w, pl.DataFrame({"week": [w], "x": [w * 10]}, schema=SCHEMA), SCHEMA
        )
    assert wh.scan("t").collect()["x"].to_list() == [10, 30]
    assert wh.scan("t", [3, 5]).collect()["x"].to_list() == [30]
    assert wh.scan("none", schema=SCHEMA).collect().height == 0


def test_a_partition_missing_a_column_of_its_schema_is_named(tmp_path):
    wh = Warehouse(tmp_path)
    old = pl.DataFrame({"week": [1]}, schema={"week": pl.Int16})
    wh.write_partition("t", 1, old, old.schema)
    with pytest.raises(StaleSchemaError, match=r"t: .* lacks the columns \['x'\].*re-materialize"):
        wh.scan("t", [1], schema=SCHEMA)


def test_ingest_weeks_accounts_for_every_row_and_records_gaps(tiny_dataset, tmp_path):
    wh = Warehouse(tmp_path)
    report, _ = ingest_weeks(tiny_dataset["raw"], wh, range(1, 7))
    assert (report["rows_read"] == report["rows_kept"] + report["rows_rejected"]).all()
    assert report.filter(pl.col("week") == 4)["status"][0] == "missing"
    assert wh.missing_weeks(RAW_TABLE) == [4] and wh.missing_weeks(QUARANTINE_TABLE) == [4]
    assert wh.scan(RAW_TABLE).select(pl.len()).collect().item() == report["rows_kept"].sum()
    assert set(wh.scan(RAW_TABLE).select("week").unique().collect()["week"]) == {1, 2, 3, 5, 6}


def test_steps_refuse_weeks_that_were_never_materialized(tmp_path):
    from retailsim_core.pipeline.data.price_weeks import derive_price_weeks

    wh = Warehouse(tmp_path)
    wh.write_partition("t", 1, pl.DataFrame({"week": [1], "x": [1]}, schema=SCHEMA), SCHEMA)
    wh.require_weeks("t", [1])
    with pytest.raises(FileNotFoundError, match="t week 2 is not materialized"):
        wh.require_weeks("t", [1, 2])
    with pytest.raises(FileNotFoundError, match="raw_transactions week 1 is not materialized"):
        derive_price_weeks(wh, [1])
