"""Promotion-plan weeks in the warehouse: a source without a plan writes empty weeks marked
no_table, which no reader takes for "nothing promoted"; a plan's weeks reach the shelf reader."""

import polars as pl

from retailsim_core.calendar import COMPLETE_JOURNEY
from retailsim_core.ingest.completejourney import PRODUCTS_SCHEMA
from retailsim_core.ingest.promotion_plan import SOURCE_SCHEMA
from retailsim_core.pipeline.data.promotion_weeks import ingest_promotions, known_promotion_weeks
from retailsim_core.pipeline.readers.warehouse_inputs import promotion_plan
from retailsim_core.storage.warehouse import Warehouse


def _raw(folder):
    folder.mkdir()
    pl.DataFrame(
        [(1, 10, "GROCERY", "National", "SOUP", "SOUP: CANNED", None)],
        schema=PRODUCTS_SCHEMA,
        orient="row",
    ).write_parquet(folder / "products.parquet")
    pl.DataFrame(
        [(1, 330, "3", "0", 2), (1, 330, "0", "0", 2)], schema=SOURCE_SCHEMA, orient="row"
    ).write_parquet(folder / "promotions.parquet")


def test_a_source_without_a_plan_is_not_read_as_an_empty_plan(tmp_path):
    _raw(tmp_path / "raw")
    wh = Warehouse(tmp_path / "wh", COMPLETE_JOURNEY)
    report, reasons = ingest_promotions(tmp_path / "raw", wh, [2, 3], source="lgsr")
    assert report["status"].to_list() == ["no_table", "no_table"] and reasons.is_empty()
    assert known_promotion_weeks(wh, [2, 3]) == [] and promotion_plan(wh, [2, 3]) is None


def test_a_plan_is_ingested_with_its_accounting_and_read_back(tmp_path):
    _raw(tmp_path / "raw")
    wh = Warehouse(tmp_path / "wh", COMPLETE_JOURNEY)
    report, reasons = ingest_promotions(tmp_path / "raw", wh, [2, 3], source="completejourney")
    row = report.row(0, named=True)
    assert (row["rows_read"], row["rows_kept"], row["rows_rejected"], row["cells"]) == (2, 1, 1, 1)
    assert reasons.rows() == [("not_a_promotion", 1)]
    assert known_promotion_weeks(wh, [2, 3]) == [2, 3]  # week 3: a plan that promotes nothing
    plan = promotion_plan(wh, [2, 3])
    assert plan.rows() == [("PRD0000001", "STORE00330", 2, True, False)]
