"""The validation rules of an LGSR week file as Polars expressions over its text cells.

Every rule is a (failure condition, reason) pair; ``week_file.validate_week`` evaluates them
all as one bitmask and decodes the reasons of the (few) failing rows only.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from retailsim_core.calendar import monday_of
from retailsim_core.ingest.lgsr import (
    BASKET_LEVEL_COLUMNS,
    CODE_SETS,
    FULL_HEADER,
    ID_PATTERNS,
    NULLABLE_COLUMNS,
    RAW_COLUMN_NAMES,
    RAW_TRANSACTIONS_SCHEMA,
)

BASKET_INCONSISTENT = "basket_inconsistent"


# Bounds of one line (D78): the real sample's largest are 1,685 units and 2,594.90; a line past
# these is a corrupt value (2,147,483,647 units, 1e308), not a purchase.
MAX_QUANTITY = 100_000
MAX_SPEND = 1_000_000.0


def empty_cell(col: str) -> pl.Expr:
    return pl.col(col).is_null() | (pl.col(col) == "")


def typed_columns() -> list[pl.Expr]:
    def t(c, dtype):
        return pl.col(c).cast(dtype, strict=False)

    return [
        t("SHOP_WEEK", pl.Int32).alias("_shop_week"),
        pl.col("SHOP_DATE").str.to_date("%Y%m%d", strict=False).alias("_date"),
        t("SHOP_WEEKDAY", pl.Int8).alias("_weekday"),
        t("SHOP_HOUR", pl.Int8).alias("_hour"),
        t("QUANTITY", pl.Int32).alias("_quantity"),
        t("SPEND", pl.Float64).alias("_spend"),
        t("BASKET_ID", pl.Int64).alias("_basket"),
    ]


def week_rules(week: int) -> list[tuple[pl.Expr, str]]:
    """(failure condition, reason) per validation rule; a null condition counts as a failure."""
    monday = monday_of(week)
    rules: list[tuple[pl.Expr, str]] = [
        (pl.col("_shop_week").is_null(), "unparseable:SHOP_WEEK"),
        (pl.col("_date").is_null(), "unparseable:SHOP_DATE"),
        (pl.col("_weekday").is_null(), "unparseable:SHOP_WEEKDAY"),
        (pl.col("_hour").is_null(), "unparseable:SHOP_HOUR"),
        (pl.col("_quantity").is_null(), "unparseable:QUANTITY"),
        (pl.col("_spend").is_null() | ~pl.col("_spend").is_finite(), "unparseable:SPEND"),
    ]
    # Rules on parsed values: a value that did not parse already failed above, so its null
    # condition must not add a second, spurious reason (e.g. spend_negative for SPEND "abc").
    rules += [
        (cond.fill_null(False), reason)
        for cond, reason in [
            (pl.col("_quantity") <= 0, "quantity_not_positive"),
            (pl.col("_quantity") > MAX_QUANTITY, "quantity_out_of_range"),
            (pl.col("_spend") < 0, "spend_negative"),
            (pl.col("_spend") > MAX_SPEND, "spend_out_of_range"),
            (~pl.col("_hour").is_between(0, 23), "hour_out_of_range"),
            (
                ~pl.col("_date").is_between(monday, monday + dt.timedelta(days=6)),
                "date_outside_week",
            ),
            (pl.col("_weekday") != (pl.col("_date").dt.weekday() % 7 + 1), "weekday_mismatch"),
        ]
    ]
    for col, pattern in ID_PATTERNS.items():
        ok = pl.col(col).str.contains(pattern)
        rules.append(
            (~(ok | empty_cell(col)) if col in NULLABLE_COLUMNS else ~ok, f"unknown_code:{col}")
        )
    for col, codes in CODE_SETS.items():
        ok = pl.col(col).is_in(list(codes))
        rules.append(
            (~(ok | empty_cell(col)) if col in NULLABLE_COLUMNS else ~ok, f"unknown_code:{col}")
        )
    # Uncarded rows carry no segments; a segment without a customer is inconsistent.
    rules.append(
        (
            empty_cell("CUST_CODE") & ~empty_cell("CUST_PRICE_SENSITIVITY"),
            "segment_without_customer",
        )
    )
    rules.append((pl.col("_duplicate"), "duplicate_row"))
    rules.append((pl.col("_inconsistent_basket"), BASKET_INCONSISTENT))
    return rules


def row_flags(text: pl.DataFrame) -> list[pl.Expr]:
    """``_duplicate`` and ``_inconsistent_basket`` row flags, after one cheap probe of the file.

    - A duplicate is an exact copy of an earlier line. Copies share (BASKET_ID, PROD_CODE), so
      the full-row comparison runs only when such pairs exist.
    - An inconsistent basket has rows that disagree on a basket-level column (customer, store,
      date, hour, BASKET_*). LGSR lists a basket's rows together, so when every basket is one
      contiguous run and no row differs from the previous row of its basket, no basket is
      inconsistent and the grouped window is skipped. Which columns disagree is worked out
      later, for the rows of those baskets only (basket_detail).
    """
    values = pl.struct(BASKET_LEVEL_COLUMNS).hash()
    probe = text.select(
        values.alias("values"), pl.struct("BASKET_ID", "PROD_CODE").hash().alias("pair")
    )
    basket, hashed = text.get_column("BASKET_ID"), probe.get_column("values")
    same_basket = (basket == basket.shift(1)).fill_null(False)
    runs = len(basket) - int(same_basket.sum())
    changes = int((same_basket & (hashed != hashed.shift(1))).sum())
    # Equal pairs hash equally, so no repeated pair hash means no repeated pair.
    pairs_repeat = probe.get_column("pair").n_unique() < len(basket)
    duplicate = ~pl.struct(FULL_HEADER).is_first_distinct() if pairs_repeat else pl.lit(False)
    consistent = runs == basket.n_unique() and changes == 0
    inconsistent = pl.lit(False) if consistent else values.n_unique().over("BASKET_ID") > 1
    return [duplicate.alias("_duplicate"), inconsistent.alias("_inconsistent_basket")]


def basket_detail() -> pl.Expr:
    """For rows of inconsistent baskets, ``basket_inconsistent:<COL>`` for each column that
    varies.
    """
    varying = [
        pl.when(pl.col(c).n_unique().over("BASKET_ID") > 1).then(
            pl.lit(f"{BASKET_INCONSISTENT}:{c}")
        )
        for c in BASKET_LEVEL_COLUMNS
    ]
    return pl.concat_str(varying, separator=";", ignore_nulls=True)


def failure_mask(rules: list[tuple[pl.Expr, str]]) -> pl.Expr:
    """Bit i set where rule i fails, decoded into reason text per distinct mask."""
    assert len(rules) < 63
    return pl.sum_horizontal(
        cond.fill_null(True).cast(pl.Int64) * (1 << i) for i, (cond, _) in enumerate(rules)
    )


def decode_reasons(masks: pl.Series, rules: list[tuple[pl.Expr, str]]) -> dict[int, str]:
    """Reason text for each distinct failure mask (a handful per file, not per row)."""
    return {
        m: ";".join(r for i, (_, r) in enumerate(rules) if m >> i & 1)
        for m in masks.unique().to_list()
    }


_TYPED_COLUMNS = {
    "SHOP_WEEK": "_shop_week",
    "SHOP_DATE": "_date",
    "SHOP_WEEKDAY": "_weekday",
    "SHOP_HOUR": "_hour",
    "QUANTITY": "_quantity",
    "SPEND": "_spend",
    "BASKET_ID": "_basket",
}


def to_raw_schema(df: pl.LazyFrame, week: int) -> pl.LazyFrame:
    def column(c: str) -> pl.Expr:
        if c in _TYPED_COLUMNS:
            return pl.col(_TYPED_COLUMNS[c])
        if c in NULLABLE_COLUMNS:
            return pl.when(~empty_cell(c)).then(pl.col(c))
        return pl.col(c)

    return df.select(
        pl.lit(week).alias("week"),
        *[column(c).alias(RAW_COLUMN_NAMES[c]) for c in FULL_HEADER],
        pl.lit(None, pl.Float64).alias("regular_spend"),  # LGSR records no discounts
    ).select([pl.col(n).cast(t) for n, t in RAW_TRANSACTIONS_SCHEMA.items()])
