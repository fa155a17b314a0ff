"""Every source row of The Complete Journey is counted in exactly one partition and every line
kept names who, where and what (D113): weeks outside the calendar, missing identities,
products listed twice, repeated lines, unreadable amounts, empty or damaged tables."""

from __future__ import annotations

import datetime as dt
import os

import polars as pl
import pytest

from retailsim_core.calendar import COMPLETE_JOURNEY
from retailsim_core.ingest.completejourney import (
    PRODUCTS_SCHEMA,
    TRANSACTIONS_SCHEMA,
    week_lines,
)
from retailsim_core.ingest.completejourney_source import Export, manufacturers
from retailsim_core.ingest.promotion_plan import SOURCE_SCHEMA, week_promotions
from retailsim_core.ingest.week_file import RawFolderError
from retailsim_core.pipeline.data.ingest_weeks import ingest_weeks, source_accounting
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import QUARANTINE_TABLE, RAW_TABLE

SOUP = (1, 10, "GROCERY", "National", "SOUP", "SOUP: CANNED", "10 OZ")
PRODUCTS = pl.DataFrame([SOUP], schema=PRODUCTS_SCHEMA, orient="row")
TUESDAY = dt.datetime(2017, 1, 3, 17, 30)  # week 2


def _line(week=2, when=TUESDAY, household=900, store=330, product=1, disc=0.2, basket=7):
    return (household, store, basket, product, 1, 1.5, disc, 0.0, 0.0, week, when)


def _lines(*lines) -> pl.LazyFrame:
    return pl.DataFrame(list(lines), schema=TRANSACTIONS_SCHEMA, orient="row").lazy()


def _reasons(quarantine: pl.DataFrame) -> list[str]:
    return quarantine["reason"].to_list()


@pytest.mark.parametrize(
    ("week", "when", "home"),
    [
        (54, dt.datetime(2017, 12, 30, 17), 53),  # after the calendar: the last week's
        (0, dt.datetime(2016, 12, 20, 17), 1),  # before it: the first week's
        (None, TUESDAY, 1),  # no week at all: the first week's
    ],
)
def test_a_line_outside_the_calendar_is_quarantined_in_the_nearest_week(week, when, home):
    lines = _lines(_line(week=week, when=when))
    found = {w: week_lines(lines, PRODUCTS.lazy(), w) for w in (1, 2, 53)}
    assert sum(k.height + q.height for k, q in found.values()) == 1
    kept, quarantine = found[home]
    assert kept.is_empty() and "week_outside_calendar" in _reasons(quarantine)[0]
    assert quarantine["SHOP_WEEK"].to_list() == [None if week is None else str(week)]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (_line(household=None), "missing:household_id"),
        (_line(store=None), "missing:store_id"),
        (_line(disc=float("nan")), "unparseable:retail_disc"),
        (_line(disc=None), "unparseable:retail_disc"),
    ],
)
def test_a_line_without_its_identity_or_amounts_is_quarantined(line, reason):
    kept, quarantine = week_lines(_lines(line), PRODUCTS.lazy(), 2)
    assert kept.is_empty() and _reasons(quarantine) == [reason]


def test_a_repeated_line_is_kept_once():
    kept, quarantine = week_lines(_lines(_line(), _line(), _line(basket=8)), PRODUCTS.lazy(), 2)
    assert kept.height == 2 and _reasons(quarantine) == ["duplicate_line"]
    assert quarantine["record_number"].to_list() == [2]  # the first copy is the one kept


@pytest.mark.parametrize("order", [1, -1])
def test_a_product_listed_twice_differently_is_quarantined_whatever_the_order(order):
    fuel = (1, 10, "FUEL", "National", "FUEL", "GASOLINE", None)
    products = pl.DataFrame([SOUP, fuel, SOUP][::order], schema=PRODUCTS_SCHEMA, orient="row")
    kept, quarantine = week_lines(_lines(_line()), products.lazy(), 2)
    assert kept.is_empty() and "ambiguous_product" in _reasons(quarantine)[0]
    repeated = pl.DataFrame([SOUP, SOUP], schema=PRODUCTS_SCHEMA, orient="row")
    kept, quarantine = week_lines(_lines(_line()), repeated.lazy(), 2)  # the same listing twice
    assert kept.height == 1 and quarantine.is_empty()


def test_promotion_rows_outside_the_calendar_are_counted_in_the_nearest_week():
    rows = pl.DataFrame(
        [(1, 330, "1", "0", 54), (1, 330, "1", "0", None), (1, 330, "1", "0", 2)],
        schema=SOURCE_SCHEMA,
        orient="row",
    ).lazy()
    counted = {w: week_promotions(rows, PRODUCTS.lazy(), w) for w in (1, 2, 53)}
    assert sum(read for _, _, read in counted.values()) == 3
    for week in (1, 53):
        cells, quarantine, read = counted[week]
        assert read == 1 and cells.is_empty()
        assert "week_outside_calendar" in quarantine["reason"][0]


def _export(folder, lines, products=PRODUCTS):
    folder.mkdir(exist_ok=True)
    products.write_parquet(folder / "products.parquet")
    pl.DataFrame(lines, schema=TRANSACTIONS_SCHEMA, orient="row").write_parquet(
        folder / "transactions.parquet"
    )
    for name in ("products.parquet", "transactions.parquet"):
        os.utime(folder / name, (0, 0))  # written long ago: settled
    return folder


def test_the_whole_source_adds_up_once_every_week_is_ingested(tmp_path):
    lines = [_line(), _line(week=54, when=dt.datetime(2017, 12, 30, 17)), _line(week=None)]
    raw = _export(tmp_path / "raw", lines)
    wh = Warehouse(tmp_path / "wh", COMPLETE_JOURNEY)
    ingest_weeks(raw, wh, [2], source="completejourney")
    partial = source_accounting(wh)
    assert partial["passed"] and partial["rows_counted"] == 1 and partial["source_rows"] == 3
    ingest_weeks(raw, wh, range(1, 54), source="completejourney")
    whole = source_accounting(wh)
    assert whole["passed"] and whole["rows_counted"] == 3 and whole["weeks_published"] == 53
    assert wh.scan(RAW_TABLE).collect().height + wh.scan(QUARANTINE_TABLE).collect().height == 3


def test_an_empty_or_damaged_table_is_refused_naming_it(tmp_path):
    raw = _export(tmp_path / "raw", [])
    with pytest.raises(RawFolderError, match="transactions.parquet: no rows"):
        Export(raw)
    _export(raw, [_line()])
    path = raw / "transactions.parquet"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    os.utime(path, (0, 0))
    with pytest.raises(RawFolderError, match=f"{path}: not a readable Parquet table"):
        Export(raw)


def test_the_brands_checked_are_the_same_whatever_the_products_order(tmp_path):
    other = (2, 11, "PRODUCE", "Private", "TOMATOES", None, None)
    fuel = (1, 12, "FUEL", "National", "FUEL", "GASOLINE", None)
    found = []
    for order in (1, -1):
        (tmp_path / "p").mkdir(exist_ok=True)
        pl.DataFrame(
            [SOUP, other, fuel][::order], schema=PRODUCTS_SCHEMA, orient="row"
        ).write_parquet(tmp_path / "p" / "products.parquet")
        found.append(manufacturers(tmp_path / "p"))
    assert found[0].equals(found[1]) and found[0]["product_id"].to_list() == ["PRD0000002"]
