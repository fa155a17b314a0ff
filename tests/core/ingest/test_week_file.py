"""LGSR ingestion: exact format round trips, every bad-input case, and row accounting."""

from __future__ import annotations

import gzip
import shutil

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from retailsim_core.ingest.lgsr import FULL_HEADER, QUARANTINE_SCHEMA, RAW_TRANSACTIONS_SCHEMA
from retailsim_core.ingest.week_file import LGSRFileError, ingest_week, validate_week
from retailsim_core.synth import build_world
from retailsim_core.synth.baskets import simulate_week
from retailsim_core.synth.writer import generate, week_frame

WEEK = 3  # SHOP_WEEK 200609, Monday 2006-04-24


@pytest.fixture(scope="module")
def expected(tiny_cfg) -> pl.DataFrame:
    """What week 3 must ingest to, built from the generator's in-memory frame."""
    world = build_world(tiny_cfg)
    lines, _ = week_frame(world, WEEK, simulate_week(world, WEEK))

    def blank(c):
        return pl.when(pl.col(c) != "").then(pl.col(c))

    return lines.select(
        pl.lit(WEEK, pl.Int16).alias("week"),
        pl.col("SHOP_WEEK").cast(pl.Int32).alias("shop_week"),
        pl.col("SHOP_DATE").str.to_date("%Y%m%d").alias("shop_date"),
        pl.col("SHOP_WEEKDAY").cast(pl.Int8).alias("shop_weekday"),
        pl.col("SHOP_HOUR").cast(pl.Int8).alias("shop_hour"),
        pl.col("QUANTITY").cast(pl.Int32).alias("quantity"),
        pl.col("SPEND").cast(pl.Float64).alias("spend"),
        pl.lit(None, pl.Float64).alias("regular_spend"),  # LGSR records no discounts
        pl.col("PROD_CODE").alias("product_id"),
        *[pl.col(f"PROD_CODE_{k}").alias(f"prod_code_{k}") for k in (10, 20, 30, 40)],
        blank("CUST_CODE").alias("customer_id"),
        blank("CUST_PRICE_SENSITIVITY").alias("cust_price_sensitivity"),
        blank("CUST_LIFESTAGE").alias("cust_lifestage"),
        pl.col("BASKET_ID").cast(pl.Int64).alias("basket_id"),
        pl.col("BASKET_SIZE").alias("basket_size"),
        pl.col("BASKET_PRICE_SENSITIVITY").alias("basket_price_sensitivity"),
        pl.col("BASKET_TYPE").alias("basket_type"),
        pl.col("BASKET_DOMINANT_MISSION").alias("basket_dominant_mission"),
        pl.col("STORE_CODE").alias("store_id"),
        pl.col("STORE_FORMAT").alias("store_format"),
        pl.col("STORE_REGION").alias("store_region"),
    )


@pytest.mark.parametrize(
    "header,compress", [("full", False), ("full", True), ("sample", False), ("sample", True)]
)
def test_round_trip_generator_to_ingestion(tmp_path, tiny_cfg, expected, header, compress):
    generate(
        tiny_cfg,
        tmp_path / "raw",
        tmp_path / "truth",
        header=header,
        compress=compress,
        weeks=[WEEK],
    )
    result = ingest_week(tmp_path / "raw", WEEK)
    assert result.source_file.endswith(".csv.gz" if compress else ".csv")
    assert result.header_variant == header and result.quarantine.height == 0
    assert result.kept.schema == RAW_TRANSACTIONS_SCHEMA
    if header == "sample":  # the sample has no seg_2 code for lifestage XX: it reads as empty
        expected = expected.with_columns(
            pl.when(pl.col("cust_lifestage") != "XX")
            .then(pl.col("cust_lifestage"))
            .alias("cust_lifestage")
        )
    assert_frame_equal(result.kept, expected)


def test_missing_week_is_reported_not_failed(tiny_dataset):
    result = ingest_week(tiny_dataset["raw"], 4)
    assert result.missing and result.source_file is None and result.rows_read == 0


# --- bad input -----------------------------------------------------------------------------


@pytest.fixture()
def week_text(tiny_dataset) -> pl.DataFrame:
    from retailsim_core.ingest.week_file import read_week_text

    text, _, _ = read_week_text(tiny_dataset["raw"] / "transactions_200609.csv")
    return text


def _first_basket(text: pl.DataFrame) -> int:
    counts = text.group_by("BASKET_ID").len().filter(pl.col("len") >= 2).sort("BASKET_ID")
    return counts["BASKET_ID"][0]


ROW_CASES = {
    "QUANTITY=0": ({"QUANTITY": "0"}, "quantity_not_positive"),
    "QUANTITY=-2": ({"QUANTITY": "-2"}, "quantity_not_positive"),
    "QUANTITY=abc": ({"QUANTITY": "abc"}, "unparseable:QUANTITY"),
    "QUANTITY=1.5": ({"QUANTITY": "1.5"}, "unparseable:QUANTITY"),
    "SPEND<0": ({"SPEND": "-1.00"}, "spend_negative"),
    "SPEND=nan": ({"SPEND": "NaN"}, "unparseable:SPEND"),
    "SPEND empty": ({"SPEND": ""}, "unparseable:SPEND"),
    "SHOP_DATE bad": ({"SHOP_DATE": "2006-04-24"}, "unparseable:SHOP_DATE"),
    "date in another week": ({"SHOP_DATE": "20060501", "SHOP_WEEKDAY": "2"}, "date_outside_week"),
    "weekday mismatch": ({"SHOP_WEEKDAY": "9"}, "weekday_mismatch"),
    "hour 25": ({"SHOP_HOUR": "25"}, "hour_out_of_range"),
    "unknown product code": ({"PROD_CODE": "XYZ123"}, "unknown_code:PROD_CODE"),
    "unknown sub-commodity": ({"PROD_CODE_10": "CL12"}, "unknown_code:PROD_CODE_10"),
    "unknown store code": ({"STORE_CODE": "SHOP1"}, "unknown_code:STORE_CODE"),
    "unknown store format": ({"STORE_FORMAT": "XXL"}, "unknown_code:STORE_FORMAT"),
    "unknown region": ({"STORE_REGION": "Z09"}, "unknown_code:STORE_REGION"),
    "unknown basket type": ({"BASKET_TYPE": "Weekly"}, "unknown_code:BASKET_TYPE"),
    "unknown lifestage": ({"CUST_LIFESTAGE": "ZZ"}, "unknown_code:CUST_LIFESTAGE"),
    "basket id not an integer": ({"BASKET_ID": "99x"}, "unknown_code:BASKET_ID"),
    # Unicode digits are digits to `\d` and to Python, not to LGSR (issue #38, D78).
    "basket id in Arabic-Indic digits": ({"BASKET_ID": "99\u0660"}, "unknown_code:BASKET_ID"),
    "product code in Arabic-Indic digits": (
        {"PROD_CODE": "PRD09\u0660\u0660286"},
        "unknown_code:PROD_CODE",
    ),
    "QUANTITY=2147483647": ({"QUANTITY": "2147483647"}, "quantity_out_of_range"),
    "SPEND=1e308": ({"SPEND": "1e308"}, "spend_out_of_range"),
}


@pytest.mark.parametrize("case", sorted(ROW_CASES))
def test_each_bad_row_is_quarantined_with_its_reason(week_text, case):
    changes, reason = ROW_CASES[case]
    line = week_text["record_number"][5]
    bad = week_text.with_columns(
        pl.when(pl.col("record_number") == line).then(pl.lit(v)).otherwise(pl.col(c)).alias(c)
        for c, v in changes.items()
    )
    kept, quarantine = validate_week(bad, WEEK, "transactions_200609.csv")
    assert kept.height + quarantine.height == week_text.height
    assert quarantine.schema == QUARANTINE_SCHEMA
    hit = quarantine.filter(pl.col("record_number") == line)
    assert hit.height == 1 and reason in hit["reason"][0].split(";")
    for col, value in changes.items():  # the quarantined row keeps the file's text verbatim
        assert hit[col][0] == value


@pytest.mark.parametrize(
    "column,value",
    [
        ("CUST_CODE", "CUST0000099999"),
        ("STORE_CODE", "STORE00999"),
        ("SHOP_HOUR", "8"),
        ("BASKET_TYPE", "XX"),
    ],
)
def test_inconsistent_basket_quarantines_the_whole_basket(week_text, column, value):
    basket = _first_basket(week_text)
    rows = week_text.filter(pl.col("BASKET_ID") == basket)
    first = rows["record_number"][0]
    if rows[column][0] == value:
        value = "9" if column == "SHOP_HOUR" else value.replace("9", "8")
    bad = week_text.with_columns(
        pl.when(pl.col("record_number") == first)
        .then(pl.lit(value))
        .otherwise(pl.col(column))
        .alias(column)
    )
    kept, quarantine = validate_week(bad, WEEK, "f.csv")
    assert set(quarantine["BASKET_ID"]) == {basket}
    assert quarantine.height == rows.height
    assert quarantine["reason"].str.contains(f"basket_inconsistent:{column}").all()
    assert kept.height + quarantine.height == week_text.height


def test_segment_without_customer_is_quarantined(week_text):
    uncarded = week_text.filter(pl.col("CUST_CODE").is_null())["record_number"][0]
    bad = week_text.with_columns(
        pl.when(pl.col("record_number") == uncarded)
        .then(pl.lit("LA"))
        .otherwise(pl.col("CUST_PRICE_SENSITIVITY"))
        .alias("CUST_PRICE_SENSITIVITY")
    )
    _, quarantine = validate_week(bad, WEEK, "f.csv")
    assert (
        "segment_without_customer"
        in quarantine.filter(pl.col("record_number") == uncarded)["reason"][0]
    )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_row_accounting_holds_under_random_corruption(week_text, data):
    n = week_text.height
    lines = data.draw(st.lists(st.integers(0, n - 1), max_size=25, unique=True))
    column = data.draw(st.sampled_from(FULL_HEADER))
    value = data.draw(
        st.sampled_from(["", "0", "-1", "abc", "XX", "200609", "1e9", " ", "PRD0900001"])
    )
    targets = week_text["record_number"].gather(lines) if lines else pl.Series([], dtype=pl.Int64)
    bad = week_text.with_columns(
        pl.when(pl.col("record_number").is_in(targets.implode()))
        .then(pl.lit(value))
        .otherwise(pl.col(column))
        .alias(column)
    )
    try:
        kept, quarantine = validate_week(bad, WEEK, "f.csv")
    except LGSRFileError as err:  # only a parseable SHOP_WEEK of another week may do this
        assert column == "SHOP_WEEK" and "200609" in str(err)
        return
    assert kept.height + quarantine.height == n
    assert set(quarantine["record_number"]) | set(range(2, n + 2)) == set(range(2, n + 2))
    assert kept.schema == RAW_TRANSACTIONS_SCHEMA
    assert kept["quantity"].min() is None or kept["quantity"].min() >= 1


# --- whole-file errors ---------------------------------------------------------------------


def _copy_week(tiny_dataset, tmp_path, name="transactions_200609.csv"):
    (tmp_path / "raw").mkdir(exist_ok=True)
    return shutil.copy(tiny_dataset["raw"] / "transactions_200609.csv", tmp_path / "raw" / name)


def test_malformed_header_names_missing_and_extra_columns(tiny_dataset, tmp_path):
    path = _copy_week(tiny_dataset, tmp_path)
    text = path.read_text().replace("STORE_REGION", "REGION", 1).replace("SPEND", "SPEND_GBP", 1)
    path.write_text(text)
    with pytest.raises(
        LGSRFileError,
        match=r"transactions_200609\.csv.*missing columns \['SPEND', 'STORE_REGION'\]"
        r".*extra columns \['SPEND_GBP', 'REGION'\]",
    ):
        ingest_week(tmp_path / "raw", WEEK)


def test_file_holding_another_weeks_rows_fails_naming_the_file(tiny_dataset, tmp_path):
    (tmp_path / "raw").mkdir()
    shutil.copy(
        tiny_dataset["raw"] / "transactions_200608.csv",
        tmp_path / "raw" / "transactions_200609.csv",
    )
    with pytest.raises(
        LGSRFileError, match=r"transactions_200609\.csv: holds rows of SHOP_WEEK \[200608\]"
    ):
        ingest_week(tmp_path / "raw", WEEK)


def test_unreadable_file_fails_naming_the_file(tmp_path):
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "transactions_200609.csv.gz").write_bytes(
        gzip.compress(b"\xff\xfe\x00garbage")[:12]
    )
    with pytest.raises(LGSRFileError, match=r"transactions_200609\.csv\.gz"):
        ingest_week(tmp_path / "raw", WEEK)


def test_csv_and_gzip_for_one_week_is_ambiguous(tiny_dataset, tmp_path):
    _copy_week(tiny_dataset, tmp_path)
    _copy_week(tiny_dataset, tmp_path, "transactions_200609.csv.gz")
    with pytest.raises(LGSRFileError, match="keep one"):
        ingest_week(tmp_path / "raw", WEEK)


def test_ragged_rows_fail_naming_the_file(tiny_dataset, tmp_path):
    path = _copy_week(tiny_dataset, tmp_path)
    path.write_text(
        path.read_text() + "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24\n"
    )
    with pytest.raises(LGSRFileError, match=r"transactions_200609\.csv"):
        ingest_week(tmp_path / "raw", WEEK)


def test_empty_file_fails_naming_the_file(tmp_path):
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "transactions_200609.csv").write_bytes(b"")
    with pytest.raises(LGSRFileError, match=r"transactions_200609\.csv: is empty"):
        ingest_week(tmp_path / "raw", WEEK)


def test_header_only_file_fails_naming_the_file(tmp_path):
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "transactions_200609.csv").write_text(",".join(FULL_HEADER) + "\n")
    with pytest.raises(LGSRFileError, match=r"transactions_200609\.csv: has a header but no rows"):
        ingest_week(tmp_path / "raw", WEEK)


def test_wrong_delimiter_is_a_malformed_header(tiny_dataset, tmp_path):
    path = _copy_week(tiny_dataset, tmp_path)
    path.write_text(path.read_text().replace(",", ";"))
    with pytest.raises(LGSRFileError, match=r"transactions_200609\.csv: malformed LGSR header"):
        ingest_week(tmp_path / "raw", WEEK)


def test_invalid_utf8_row_is_quarantined_not_fatal(tiny_dataset, tmp_path):
    path = _copy_week(tiny_dataset, tmp_path)
    lines = path.read_bytes().split(b"\n")
    lines[4] = lines[4].replace(b"PRD09", b"PRD\xff9", 1)
    path.write_bytes(b"\n".join(lines))
    result = ingest_week(tmp_path / "raw", WEEK)
    assert result.quarantine["record_number"].to_list() == [5]
    assert "unknown_code:PROD_CODE" in result.quarantine["reason"][0]
    assert not result.kept["product_id"].str.contains("\ufffd", literal=True).any()


def test_truncated_last_line_is_quarantined(tiny_dataset, tmp_path):
    path = _copy_week(tiny_dataset, tmp_path)
    text = path.read_text().rstrip("\n")
    path.write_text(text[: text.rfind(",", 0, len(text) - 40)])  # cut the last row mid-way
    result = ingest_week(tmp_path / "raw", WEEK)
    n_lines = text.count("\n")
    assert result.rows_read == n_lines and result.quarantine["record_number"].to_list() == [
        n_lines + 1
    ]


def test_duplicated_row_quarantines_the_copy_only(week_text):
    dup = pl.concat(
        [week_text, week_text[7].with_columns(pl.lit(10**6, pl.UInt32).alias("record_number"))]
    )
    kept, quarantine = validate_week(dup, WEEK, "f.csv")
    assert (
        quarantine["record_number"].to_list() == [10**6]
        and quarantine["reason"][0] == "duplicate_row"
    )
    assert kept.height == week_text.height


@pytest.mark.parametrize("corrupt", [False, True])
def test_basket_check_fast_path_matches_grouped_window(week_text, corrupt):
    """Contiguous baskets take the one-pass path; shuffled rows force the grouped window.
    Both must quarantine exactly the same rows."""
    text = week_text
    if corrupt:
        basket = _first_basket(text)
        first = text.filter(pl.col("BASKET_ID") == basket)["record_number"][0]
        text = text.with_columns(
            pl.when(pl.col("record_number") == first)
            .then(pl.lit("STORE00999"))
            .otherwise(pl.col("STORE_CODE"))
            .alias("STORE_CODE")
        )
    _, sorted_q = validate_week(text, WEEK, "f.csv")
    _, shuffled_q = validate_week(text.sample(fraction=1.0, shuffle=True, seed=3), WEEK, "f.csv")
    assert_frame_equal(sorted_q.sort("record_number"), shuffled_q.sort("record_number"))
    assert (sorted_q.height > 0) == corrupt
