"""Price derivation (design §2.2.2): configuration, table schemas and the week's observed prices.

Glossary: a *cell* is a (product, store) pair in the store's assortment to date — the pairs
sold at that store in any week <= W. Every cell gets a price every week: observed when the pair
sold that week, else imputed by the waterfall.

- ``actual_price``    median(SPEND / QUANTITY) of the cell's lines that week, else imputed
- ``base_price``      spec: max of the cell's price over weeks W-3..W
- ``reference_price`` the regular-price reference used for promotion detection: the max of the
                      cell's observed prices over W-25..W when it has >= 3 such observations, else
                      the max over W-25..W across stores of the same region and format (one
                      pricing zone) — the spec's 4-week own max misses promotions of products
                      that did not sell at that store in the three prior weeks
- ``discount_depth``  1 - actual / reference (observed cells; 0 for imputed ones); ``promo_flag``
                      when > 5%
- ``validation_flags`` one bit per business rule (:data:`VALIDATION_FLAG_BITS`); :func:`flag`
                      reads one as a boolean

The package, one concept: this module (configuration, schemas, observed prices), ``state.py``
(what a week carries to the next), ``cells.py`` (the array engine), ``fold.py`` (the week's
fold, the NumPy reference), ``kernel.py`` with ``price_week.c`` (its compiled path) and
``reference.py`` (the same formulas as Polars joins, the oracle the engine is tested against).
The warehouse-bound weekly step is ``pipeline/data/price_weeks.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from retailsim_core.ingest.lgsr import STORE_FORMAT_CODES, STORE_REGION_CODES

BASE_WINDOW = 4  # design §2.2.2 step 2: base price = max over weeks w-3..w
IMPUTATION_METHODS = (
    "observed",
    "product_store_mean",
    "product_region_week_mean",
    "product_chain_mean",
)
VALIDATION_FLAGS = (
    "price_nonpositive",
    "price_over_max",
    "depth_over_max",
    "base_price_decrease",
    "low_coverage",
    "high_volatility",
)
VALIDATION_FLAG_BITS = {name: 1 << i for i, name in enumerate(VALIDATION_FLAGS)}
STORE_SPAN = (
    100_000  # STORE_CODE has 5 digits: cell key = product number * STORE_SPAN + store number
)
REGION_INDEX = {code: i for i, code in enumerate(STORE_REGION_CODES)}
FORMAT_INDEX = {code: i for i, code in enumerate(STORE_FORMAT_CODES)}
# A store whose source records no region or format (The Complete Journey) gets a code of its
# own, so its zone is the product chain-wide; a null code made every product one zone (D90).
UNKNOWN_REGION, UNKNOWN_FORMAT = len(STORE_REGION_CODES), len(STORE_FORMAT_CODES)
assert UNKNOWN_REGION < 16 and UNKNOWN_FORMAT < 16


def zone_of(product_num, region, fmt):
    """Exact integer key of a pricing zone (product x region x format) from the product number and
    the REGION_INDEX / FORMAT_INDEX codes (UNKNOWN_* where not recorded); works on NumPy arrays
    and Polars expressions alike."""
    return product_num * 256 + region * 16 + fmt


@dataclass(frozen=True)
class PriceConfig:
    reference_window: int = 26  # promo reference lookback (weeks, W included); see decisions.md
    min_own_observations: int = 3  # own observations needed before trusting the cell alone
    store_mean_window: int = 13  # waterfall level 2: the cell's mean over its recent weeks
    promo_threshold: float = 0.05  # spec: promo when depth > 5%
    max_price: float = 100.0  # spec: grocery outlier threshold
    max_depth: float = 0.7  # spec: at most 70% off
    max_missing_share: float = 0.3  # spec: > 30% missing weeks -> low quality
    max_cv: float = 0.5  # spec: CV > 0.5 -> investigate

    @property
    def history_weeks(self) -> int:
        return max(self.reference_window, self.store_mean_window, BASE_WINDOW)


OBSERVED_SCHEMA = pl.Schema(
    {
        "cell": pl.Int64,
        "week": pl.Int16,
        "store_region": pl.String,
        "store_format": pl.String,
        "observed_price": pl.Float64,
        "regular_price": pl.Float64,  # the source's regular shelf price; null where not recorded
        "n_lines": pl.UInt32,
        "units": pl.Int64,
    }
)
# Closed vocabularies as Enums (D50): Parquet dictionary columns that read back as strings
# elsewhere (DuckDB: VARCHAR), and the cheapest columns to write.
REGION = pl.Enum(STORE_REGION_CODES)
FORMAT = pl.Enum(STORE_FORMAT_CODES)
METHOD = pl.Enum(IMPUTATION_METHODS)
DERIVED_PRICES_SCHEMA = pl.Schema(
    {
        "product_id": pl.String,
        "store_id": pl.String,
        "store_region": REGION,
        "store_format": FORMAT,
        "week": pl.Int16,
        "shop_week": pl.Int32,
        "actual_price": pl.Float64,
        "base_price": pl.Float64,
        "reference_price": pl.Float64,
        "discount_depth": pl.Float64,
        "base_discount_depth": pl.Float64,
        "promo_flag": pl.Boolean,
        "imputation_method": METHOD,
        "quality_score": pl.Float64,
        "validation_flags": pl.UInt8,
        "observed_price": pl.Float64,
        # The source's regular shelf price where a line recorded it (D90): the one input of the
        # week fold an observed row would not otherwise keep, so the stored rows replay (D96).
        "regular_price": pl.Float64,
        "n_lines": pl.UInt32,
        "units": pl.Int64,
        # The cell's and its product's running statistics: the state a later run resumes from.
        "first_week": pl.Int16,
        "n_obs_to_date": pl.Int32,
        "price_sum_to_date": pl.Float64,
        "price_sumsq_to_date": pl.Float64,
        "product_first_week": pl.Int16,
        "product_obs_weeks": pl.Int32,
        "missing_share": pl.Float64,
        "price_cv": pl.Float64,
    }
)


def flag(name: str) -> pl.Expr:
    """``validation_flags`` bit ``name`` as a boolean (SQL: ``validation_flags & bit <> 0``)."""
    return ((pl.col("validation_flags") & VALIDATION_FLAG_BITS[name]) != 0).alias(name)


def cell_key() -> pl.Expr:
    """Exact integer key from canonical codes (PRD + at least 7 digits, STORE + 5 digits; D85):
    joins and group-bys on one Int64 are several times faster than on two strings."""
    product_num = pl.col("product_id").str.slice(3).cast(pl.Int64)
    return (product_num * STORE_SPAN + pl.col("store_id").str.slice(5).cast(pl.Int64)).alias("cell")


def cell_codes() -> list[pl.Expr]:
    """The LGSR codes back from ``cell``: the inverse of :func:`cell_key`."""

    def digits(expr, width):
        return expr.cast(pl.String).str.zfill(width)

    return [
        pl.concat_str(pl.lit("PRD"), digits(pl.col("cell") // STORE_SPAN, 7)).alias("product_id"),
        pl.concat_str(pl.lit("STORE"), digits(pl.col("cell") % STORE_SPAN, 5)).alias("store_id"),
    ]


def observed_prices(raw: pl.LazyFrame) -> pl.LazyFrame:
    """Step 1: median unit price per product x store x week, from raw_transactions rows, and
    where the source records discounts (``regular_spend``) the median regular shelf price, never
    below the paid one (D90; null where no line of the cell records it).

    Sorting by (cell, unit price) first turns the median into a positional pick per group; the
    store's region and format come from its first row of the week (store attributes).
    """
    stores = raw.select(
        pl.col("store_id").str.slice(5).cast(pl.Int64).alias("store"),
        "store_region",
        "store_format",
    ).unique("store", keep="first", maintain_order=True)
    # One sort key (cell, week) packed in an Int64 (cell < 1e12, week < 128): half the sort cost of
    # two keys.
    return (
        raw.select(
            cell_key(),
            "week",
            (pl.col("spend") / pl.col("quantity")).alias("unit"),
            (pl.col("regular_spend") / pl.col("quantity")).alias("regular_unit"),
            "quantity",
        )
        .with_columns(cell_week=pl.col("cell") * 128 + pl.col("week"))
        .sort("cell_week", "unit")
        .group_by("cell_week", maintain_order=True)
        .agg(
            pl.col("cell").first(),
            pl.col("week").first(),
            pl.col("unit").median().alias("observed_price"),
            pl.col("regular_unit").median().alias("regular_price"),
            pl.len().alias("n_lines"),
            pl.col("quantity").sum().cast(pl.Int64).alias("units"),
        )
        .with_columns(
            store=pl.col("cell") % STORE_SPAN,
            regular_price=pl.when(pl.col("regular_price").is_not_null()).then(
                pl.max_horizontal("regular_price", "observed_price")
            ),
        )
        .join(stores, on="store", how="left", maintain_order="left")
        .select(OBSERVED_SCHEMA.names())
        .cast(dict(OBSERVED_SCHEMA))
    )
