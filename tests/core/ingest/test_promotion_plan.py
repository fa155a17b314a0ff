"""A source's promotion plan on tiny literal tables: the canonical cells, merged duplicates,
every quarantine reason, and the row accounting (rows read = rows merged + rows quarantined)."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retailsim_core.ingest.completejourney import PRODUCTS_SCHEMA
from retailsim_core.ingest.promotion_plan import (
    PROMOTIONS_QUARANTINE_SCHEMA,
    SOURCE_PROMOTIONS_SCHEMA,
    SOURCE_SCHEMA,
    PromotionTable,
    week_promotions,
)

PRODUCTS = pl.DataFrame(
    [
        (1, 10, "GROCERY", "National", "SOUP", "SOUP: CANNED", "10 OZ"),
        (2, 11, "PRODUCE", "Private", "TOMATOES", None, None),
        (4, 13, "FUEL", "Private", "GASOLINE", "GASOLINE", None),
        (5, 14, "MISCELLANEOUS", "National", "COUPON/MISC ITEMS", "GIFT CARD", None),
    ],
    schema=PRODUCTS_SCHEMA,
    orient="row",
)


def _rows(*rows) -> pl.LazyFrame:
    return pl.DataFrame(list(rows), schema=SOURCE_SCHEMA, orient="row").lazy()


def test_a_row_maps_to_a_canonical_cell():
    cells, quarantine, read = week_promotions(_rows((1, 330, "3", "0", 2)), PRODUCTS.lazy(), 2)
    assert read == 1 and quarantine.is_empty() and cells.schema == SOURCE_PROMOTIONS_SCHEMA
    assert cells.row(0, named=True) == {
        "week": 2,
        "product_id": "PRD0000001",
        "store_id": "STORE00330",
        "display": True,
        "mailer": False,
        "display_location": "3",
        "mailer_location": "0",
        "source_rows": 1,
    }


def test_rows_of_one_cell_merge_and_other_weeks_are_not_read():
    rows = _rows(
        (2, 330, "0", "A", 2), (2, 330, "5", "0", 2), (2, 330, "9", "D", 2), (1, 1, "1", "0", 3)
    )
    cells, quarantine, read = week_promotions(rows, PRODUCTS.lazy(), 2)
    assert read == 3 and quarantine.is_empty() and cells.height == 1
    cell = cells.row(0, named=True)
    assert (cell["display"], cell["mailer"], cell["source_rows"]) == (True, True, 3)
    assert (cell["display_location"], cell["mailer_location"]) == ("5", "A")


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ((99, 330, "1", "0", 2), "unknown_product"),
        ((4, 330, "1", "0", 2), "excluded:fuel_or_coupon_department"),
        ((5, 330, "0", "A", 2), "excluded:coupon_misc_category"),
        ((1, 330, None, "A", 2), "missing:display_location"),
        ((1, 330, "1", None, 2), "missing:mailer_location"),
        ((1, 330, "0", "0", 2), "not_a_promotion"),
        ((1, None, "1", "0", 2), "missing:identifier"),
    ],
)
def test_each_rule_quarantines_with_its_reason(row, reason):
    cells, quarantine, read = week_promotions(_rows(row), PRODUCTS.lazy(), 2)
    assert read == 1 and cells.is_empty() and quarantine.schema == PROMOTIONS_QUARANTINE_SCHEMA
    assert quarantine["reason"].to_list() == [reason]
    assert quarantine["record_number"].to_list() == [1]


codes = st.sampled_from(["0", "1", "5", "A", "D", None])
rows = st.lists(
    st.tuples(
        st.sampled_from([1, 2, 4, 5, 99]),
        st.sampled_from([330, 331, None]),
        codes,
        codes,
        st.sampled_from([2, 3]),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(rows)
def test_every_row_of_the_week_is_merged_or_quarantined_once(rows):
    cells, quarantine, read = week_promotions(_rows(*rows), PRODUCTS.lazy(), 2)
    assert read == sum(r[4] == 2 for r in rows)
    assert int(cells["source_rows"].sum()) + quarantine.height == read
    assert cells.select("product_id", "store_id").is_unique().all()
    assert (cells["display"] | cells["mailer"]).all()


def test_a_folder_without_a_table_has_no_cells_and_says_so(tmp_path):
    table = PromotionTable(tmp_path)
    cells, quarantine, read = table.week(5)
    assert not table.present and cells.is_empty() and quarantine.is_empty() and read == 0
