"""*The Complete Journey* (84.51°) as a source: its ``transactions`` and ``products`` tables
mapped to the canonical ``raw_transactions`` schema, one week at a time, with the same row
accounting and quarantine as LGSR week files (every line read is kept or quarantined with its
reasons). The mapping (docs/complete_journey.md, D85):

- **When.** ``transaction_timestamp`` is UTC and the source's weeks are local Monday-Sunday
  weeks: in US Eastern time every line falls in its ``week`` (0 of 1,469,307 do not; in UTC
  9.8% of Monday-night lines would). Week 1 is the week of Monday 2016-12-26 (its only day with
  lines is Sunday 2017-01-01), week 53 that of 2017-12-25: ``week`` is the source's own.
- **Identifiers** take the canonical form the warehouse packs into integer keys, LGSR's prefix
  and the source's number: product 1095275 is ``PRD1095275``, store 330 ``STORE00330``,
  household 900 ``CUST0000000900`` (D85).
- **What.** The hierarchy department > product_category >
  product_type becomes prod_code_30 > 20 > 10 (prod_code_40, LGSR's top level, is the
  department too: the source has three levels). A level the source leaves empty takes its
  parent's value, so the product sits directly under the parent.
- **Who.** Every household is carded (``customer_id`` is never null).
- **How much.** ``quantity``; ``spend`` is ``sales_value``, what the retailer received after
  the loyalty discount (the LGSR meaning of SPEND); ``regular_spend`` is ``sales_value +
  retail_disc + coupon_match_disc``, the line at the shelf's regular price (D90).
- **Not in the source**: customer segments, the basket's size, type, price sensitivity and
  mission, store format and region. They are null, never a constant a model could learn from.
- **Excluded lines** go to the quarantine with a reason: FUEL (gallons, quantities in the
  thousands) and COUPON departments and the COUPON/MISC ITEMS category (coupon counts), lines
  of products missing from ``products``, lines the retailer received nothing for
  (``spend_zero``: no price to learn from), and LGSR's line rules (quantity <= 0 or > 100,000,
  spend < 0 or > 1,000,000). A quarantined line shows the mapped fields under LGSR's column
  names; ``record_number`` is its 1-based row in the source's ``transactions`` table.
"""

from __future__ import annotations

import polars as pl

from retailsim_core.calendar import COMPLETE_JOURNEY
from retailsim_core.ingest.lgsr import QUARANTINE_SCHEMA, RAW_TRANSACTIONS_SCHEMA
from retailsim_core.ingest.week_rules import MAX_QUANTITY, MAX_SPEND

TIME_ZONE = "America/New_York"
TRANSACTIONS_FILE = "transactions.parquet"
PRODUCTS_FILE = "products.parquet"

TRANSACTIONS_SCHEMA = pl.Schema(
    {
        "household_id": pl.Int64,
        "store_id": pl.Int64,
        "basket_id": pl.Int64,
        "product_id": pl.Int64,
        "quantity": pl.Int64,
        "sales_value": pl.Float64,
        "retail_disc": pl.Float64,
        "coupon_disc": pl.Float64,
        "coupon_match_disc": pl.Float64,
        "week": pl.Int64,
        "transaction_timestamp": pl.Datetime("ns"),
    }
)
PRODUCTS_SCHEMA = pl.Schema(
    {
        "product_id": pl.Int64,
        "manufacturer_id": pl.Int64,
        "department": pl.String,
        "brand": pl.String,
        "product_category": pl.String,
        "product_type": pl.String,
        "package_size": pl.String,
    }
)
AMOUNTS = ("sales_value", "retail_disc", "coupon_disc", "coupon_match_disc")
EXCLUDED_DEPARTMENTS = ("FUEL", "COUPON")
EXCLUDED_CATEGORIES = ("COUPON/MISC ITEMS",)


class SourceSchemaError(ValueError):
    """A source table without the columns (or types) the mapping reads; names the table."""


def check_schema(lf: pl.LazyFrame, schema: pl.Schema, table: str) -> pl.LazyFrame:
    have = lf.collect_schema()
    wrong = {c: f"{have.get(c)} (expected {t})" for c, t in schema.items() if have.get(c) != t}
    if wrong:
        raise SourceSchemaError(f"{table}: columns missing or of another type: {wrong}")
    return lf.select(schema.names())


def product_table(products: pl.LazyFrame) -> pl.LazyFrame:
    """One row per product of ``products`` (PRODUCTS_SCHEMA) with ``_ambiguous``: the product is
    listed more than once with different attributes (D113). Exact repeats are one listing; of
    differing ones the smallest row is shown, whatever the table's row order, and every line
    of the product is quarantined (``product_rules``): which listing is right is not ours to
    guess."""
    return (
        check_schema(products, PRODUCTS_SCHEMA, PRODUCTS_FILE)
        .unique()
        .sort(PRODUCTS_SCHEMA.names(), nulls_last=True)
        .with_columns(_ambiguous=pl.len().over("product_id") > 1)
        .unique("product_id", keep="first")
    )


def product_rules() -> list[tuple[pl.Expr, str]]:
    """(failure condition, reason) of a row's product (joined from ``product_table``): unknown,
    listed ambiguously, or of an excluded department or category. Shared by every table that
    names a product."""
    return [
        (pl.col("department").is_null(), "unknown_product"),
        (pl.col("_ambiguous").fill_null(False), "ambiguous_product"),
        # An unknown product has no department: that is its one reason, not three.
        (
            pl.col("department").is_in(EXCLUDED_DEPARTMENTS).fill_null(False),
            "excluded:fuel_or_coupon_department",
        ),
        (
            pl.col("product_category").is_in(EXCLUDED_CATEGORIES).fill_null(False),
            "excluded:coupon_misc_category",
        ),
    ]


def with_reasons(lf: pl.LazyFrame, rules: list[tuple[pl.Expr, str]]) -> pl.LazyFrame:
    """``lf`` with ``_bad`` (any rule fails; a null condition fails) and ``reason`` (every
    failing rule's reason, ";"-separated)."""
    return lf.with_columns(
        _bad=pl.any_horizontal(c.fill_null(True) for c, _ in rules),
        reason=pl.concat_str(
            [pl.when(c.fill_null(True)).then(pl.lit(r)) for c, r in rules],
            separator=";",
            ignore_nulls=True,
        ),
    )


def _rules(week: int) -> list[tuple[pl.Expr, str]]:
    """(failure condition, reason) per line rule; every failing rule is reported."""
    return [
        (pl.col("week") != week, "week_outside_calendar"),  # its source week is no week of ours
        *product_rules(),
        (pl.col("household_id").is_null(), "missing:household_id"),  # every household is carded
        (pl.col("store_id").is_null(), "missing:store_id"),
        *[(pl.col(c).is_null() | pl.col(c).is_nan(), f"unparseable:{c}") for c in AMOUNTS],
        (pl.col("_repeat"), "duplicate_line"),
        (pl.col("quantity") <= 0, "quantity_not_positive"),
        (pl.col("quantity") > MAX_QUANTITY, "quantity_out_of_range"),
        (pl.col("sales_value") < 0, "spend_negative"),
        # Free or fully couponed: the retailer received nothing, so the line has no price, and a
        # zero price makes the base price 0 and every discount depth -inf (D85).
        (pl.col("sales_value") == 0, "spend_zero"),
        (pl.col("sales_value") > MAX_SPEND, "spend_out_of_range"),
        (pl.col("shop_date").is_null(), "unparseable:transaction_timestamp"),
        (pl.col("_local_week") != week, "date_outside_week"),
        (pl.col("basket_id").is_null(), "unparseable:basket_id"),
    ]


def home_week(week: pl.Expr) -> pl.Expr:
    """The calendar week whose partition accounts for a source row of ``week``: its own, and a
    week outside the calendar (null, 0, 54) the nearest end's, where it is quarantined, so
    every source row is counted in exactly one partition (D113)."""
    last = COMPLETE_JOURNEY.n_weeks
    return week.clip(1, last).fill_null(1)


def _level(name: str, parent: pl.Expr) -> pl.Expr:
    return pl.coalesce(pl.col(name), parent)


def week_lines(
    transactions: pl.LazyFrame, products: pl.LazyFrame, week: int
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(kept in RAW_TRANSACTIONS_SCHEMA, quarantine in QUARANTINE_SCHEMA) of the source's
    ``week``: every line of the week is in exactly one of the two."""
    monday = COMPLETE_JOURNEY.monday_of(week)  # ValueError outside the source's weeks
    lines = (
        check_schema(transactions, TRANSACTIONS_SCHEMA, TRANSACTIONS_FILE)
        .with_row_index("record_number", offset=1)
        .filter(home_week(pl.col("week")) == week)
        # A line repeated verbatim is a second load of one scan (the release has none): the
        # first copy is kept, the others quarantined (D113).
        .with_columns(_repeat=pl.int_range(pl.len()).over(TRANSACTIONS_SCHEMA.names()) > 0)
        .join(product_table(products), on="product_id", how="left")
        .with_columns(
            local=pl.col("transaction_timestamp")
            .dt.replace_time_zone("UTC")
            .dt.convert_time_zone(TIME_ZONE)
        )
        .with_columns(shop_date=pl.col("local").dt.date(), shop_hour=pl.col("local").dt.hour())
        .with_columns(
            _local_week=(pl.col("shop_date") - pl.lit(monday)).dt.total_days() // 7 + week
        )
    )
    checked = with_reasons(lines, _rules(week)).collect()
    kept = checked.filter(~pl.col("_bad")).sort("record_number").select(_raw_columns(week))
    bad = checked.filter(pl.col("_bad")).sort("record_number")
    kept = kept.cast(dict(RAW_TRANSACTIONS_SCHEMA)).select(RAW_TRANSACTIONS_SCHEMA.names())
    return kept, _quarantine(bad, week)


def _raw_columns(week: int) -> list[pl.Expr]:
    department = pl.col("department")
    category = _level("product_category", department)
    text = pl.String
    return [
        pl.lit(week).alias("week"),
        pl.col("week").alias("shop_week"),  # the source's own week number
        "shop_date",
        (pl.col("shop_date").dt.weekday() % 7 + 1).alias("shop_weekday"),  # 1 = Sunday
        "shop_hour",
        "quantity",
        pl.col("sales_value").alias("spend"),
        # The shelf price before the loyalty discount and the retailer's coupon match (the
        # manufacturer's coupon is not the retailer's price): discounts are positive amounts.
        (pl.col("sales_value") + pl.col("retail_disc") + pl.col("coupon_match_disc")).alias(
            "regular_spend"
        ),
        canonical_id("PRD", "product_id", 7),
        _level("product_type", category).alias("prod_code_10"),
        category.alias("prod_code_20"),
        department.alias("prod_code_30"),
        department.alias("prod_code_40"),
        canonical_id("CUST", "household_id", 10).alias("customer_id"),
        *[
            pl.lit(None, text).alias(c)
            for c in ("cust_price_sensitivity", "cust_lifestage", "basket_size")
        ],
        "basket_id",
        *[
            pl.lit(None, text).alias(c)
            for c in ("basket_price_sensitivity", "basket_type", "basket_dominant_mission")
        ],
        canonical_id("STORE", "store_id", 5),
        pl.lit(None, text).alias("store_format"),
        pl.lit(None, text).alias("store_region"),
    ]


def canonical_id(prefix: str, column: str, width: int) -> pl.Expr:
    """The canonical identifier: LGSR's prefix and the source's number, zero-padded to LGSR's
    width (the warehouse packs product and store numbers into integer keys)."""
    return pl.concat_str(pl.lit(prefix), pl.col(column).cast(pl.String).str.zfill(width)).alias(
        column
    )


def _quarantine(bad: pl.DataFrame, week: int) -> pl.DataFrame:
    shown = {
        "SHOP_WEEK": pl.col("week"),
        "SHOP_DATE": pl.col("shop_date").dt.strftime("%Y%m%d"),
        "SHOP_HOUR": pl.col("shop_hour"),
        "QUANTITY": pl.col("quantity"),
        "SPEND": pl.col("sales_value"),
        "PROD_CODE": pl.col("product_id"),
        "PROD_CODE_10": pl.col("product_type"),
        "PROD_CODE_20": pl.col("product_category"),
        "PROD_CODE_30": pl.col("department"),
        "CUST_CODE": pl.col("household_id"),
        "BASKET_ID": pl.col("basket_id"),
        "STORE_CODE": pl.col("store_id"),
    }
    columns = [c for c in QUARANTINE_SCHEMA.names() if c not in ("week", "source_file")]
    return bad.select(
        pl.lit(week).alias("week"),
        pl.lit(TRANSACTIONS_FILE).alias("source_file"),
        *[
            shown.get(c, pl.col(c) if c in ("record_number", "reason") else pl.lit(None)).alias(c)
            for c in columns
        ],
    ).cast(dict(QUARANTINE_SCHEMA))
