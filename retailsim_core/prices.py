"""Price derivation formulas (spec §2.2.2), one shop week at a time, as pure Polars transforms.

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
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from retailsim_core.lgsr import STORE_FORMAT_CODES, STORE_REGION_CODES

BASE_WINDOW = 4  # spec §2.2.2 step 2: base price = max over weeks w-3..w
IMPUTATION_METHODS = ("observed", "product_store_mean", "product_region_week_mean", "product_chain_mean")
VALIDATION_FLAGS = ("price_nonpositive", "price_over_max", "depth_over_max", "base_price_decrease",
                    "low_coverage", "high_volatility")
VALIDATION_FLAGS_DTYPE = pl.Struct({name: pl.Boolean for name in VALIDATION_FLAGS})


@dataclass(frozen=True)
class PriceConfig:
    reference_window: int = 26      # promo reference lookback (weeks, W included); see decisions.md
    min_own_observations: int = 3   # own observations needed before trusting the cell alone
    store_mean_window: int = 13     # waterfall level 2: the cell's mean over its recent weeks
    promo_threshold: float = 0.05   # spec: promo when depth > 5%
    max_price: float = 100.0        # spec: grocery outlier threshold
    max_depth: float = 0.7          # spec: at most 70% off
    max_missing_share: float = 0.3  # spec: > 30% missing weeks -> low quality
    max_cv: float = 0.5             # spec: CV > 0.5 -> investigate

    @property
    def history_weeks(self) -> int:
        return max(self.reference_window, self.store_mean_window, BASE_WINDOW)


OBSERVED_SCHEMA = pl.Schema({
    "cell": pl.Int64, "product_num": pl.Int32,
    "product_id": pl.String, "store_id": pl.String, "store_region": pl.String, "store_format": pl.String,
    "week": pl.Int16, "observed_price": pl.Float64, "n_lines": pl.UInt32, "units": pl.Int64,
})
STORE_SPAN = 100_000  # STORE_CODE has 5 digits
_REGION_INDEX = {code: i for i, code in enumerate(STORE_REGION_CODES)}
_FORMAT_INDEX = {code: i for i, code in enumerate(STORE_FORMAT_CODES)}


def cell_keys() -> list[pl.Expr]:
    """Exact integer keys from LGSR codes (ingestion guarantees PRD + 7 digits, STORE + 5 digits):
    joins and group-bys on one Int64 are several times faster than on two strings."""
    product_num = pl.col("product_id").str.slice(3).cast(pl.Int32)
    store_num = pl.col("store_id").str.slice(5).cast(pl.Int64)
    return [(product_num.cast(pl.Int64) * STORE_SPAN + store_num).alias("cell"), product_num.alias("product_num")]


def zone_key() -> pl.Expr:
    """Exact integer key of (product, region, format): a pricing zone of one product."""
    region = pl.col("store_region").replace_strict(_REGION_INDEX, return_dtype=pl.Int64)
    fmt = pl.col("store_format").replace_strict(_FORMAT_INDEX, return_dtype=pl.Int64)
    return (pl.col("product_num").cast(pl.Int64) * 64 + region * 4 + fmt).alias("zone")


def observed_prices(raw: pl.LazyFrame) -> pl.LazyFrame:
    """Step 1: median unit price per product x store x week, from raw_transactions rows."""
    return (
        raw.group_by("product_id", "store_id", "week")
        .agg(pl.col("store_region").first(), pl.col("store_format").first(),
             (pl.col("spend") / pl.col("quantity")).median().alias("observed_price"),
             pl.len().alias("n_lines"), pl.col("quantity").sum().cast(pl.Int64).alias("units"))
        .with_columns(cell_keys())
        .select(OBSERVED_SCHEMA.names())
        .cast(dict(OBSERVED_SCHEMA))
    )


def cell_history_stats(history: pl.LazyFrame, week: int, cfg: PriceConfig) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """One pass over the observed-price history: per cell the reference max and count over the
    reference lookback and the level-2 mean over the last ``store_mean_window`` weeks; per
    pricing zone (product x region x format) the reference max."""
    recent = history.filter(pl.col("week") > week - cfg.reference_window)
    in_l2 = pl.col("week") > week - cfg.store_mean_window
    own = recent.group_by("cell").agg(
        pl.col("observed_price").max().alias("own_max"), pl.len().alias("own_n"),
        pl.col("observed_price").filter(in_l2).mean().alias("l2"))
    zone = recent.with_columns(zone_key()).group_by("zone").agg(pl.col("observed_price").max().alias("zone_max"))
    return own, zone


def waterfall(cells: pl.LazyFrame, observed: pl.LazyFrame, own: pl.LazyFrame) -> pl.LazyFrame:
    """Step 4: the cell's price this week — observed, else the first available of
    (product, store) recent mean (``own.l2``) -> (product, region, week) mean -> (product) chain
    mean to date (from the cells' cumulative sums). Every average uses weeks <= W only."""
    region_mean = observed.group_by("product_num", "store_region").agg(pl.col("observed_price").mean().alias("l3"))
    chain_mean = cells.group_by("product_num").agg(
        (pl.col("price_sum_to_date").sum() / pl.col("n_obs_to_date").sum()).alias("l4"))
    levels = [pl.col("observed_price"), pl.col("l2"), pl.col("l3"), pl.col("l4")]
    method = pl.when(levels[0].is_not_null()).then(pl.lit(IMPUTATION_METHODS[0]))
    for level, name in zip(levels[1:], IMPUTATION_METHODS[1:]):
        method = method.when(level.is_not_null()).then(pl.lit(name))
    return (
        cells.join(observed.select("cell", "observed_price", "n_lines", "units"), on="cell", how="left")
        .join(own, on="cell", how="left")
        .join(region_mean, on=["product_num", "store_region"], how="left")
        .join(chain_mean, on="product_num", how="left")
        .with_columns(pl.coalesce(levels).alias("actual_price"), method.alias("imputation_method"))
        .drop("l2", "l3", "l4")
    )


def promotions(priced: pl.LazyFrame, cfg: PriceConfig) -> pl.LazyFrame:
    """Step 3 with the documented reference: depth and promo flag for observed cells."""
    own_ok = pl.col("own_n") >= cfg.min_own_observations
    reference = pl.when(own_ok).then(pl.col("own_max")).otherwise(
        pl.max_horizontal("own_max", "zone_max"))
    observed = pl.col("observed_price").is_not_null()
    depth = pl.when(observed).then((1.0 - pl.col("observed_price") / pl.col("reference_price")).clip(0.0, 1.0))
    return priced.with_columns(reference_price=reference).with_columns(
        discount_depth=depth.fill_null(0.0),
        base_discount_depth=(1.0 - pl.col("actual_price") / pl.col("base_price")).clip(0.0, 1.0),
    ).with_columns(promo_flag=pl.col("discount_depth") > cfg.promo_threshold)


def validation(priced: pl.LazyFrame, week: int, cfg: PriceConfig) -> pl.LazyFrame:
    """Step 5: business-rule flags (a list per cell) and a quality score in [0, 1]."""
    n, s, ss = pl.col("n_obs_to_date"), pl.col("price_sum_to_date"), pl.col("price_sumsq_to_date")
    mean = s / n
    # Sample standard deviation (n - 1) over the cell's observed weeks to date.
    cv = pl.when(n >= 2).then(((ss - n * mean * mean) / (n - 1)).clip(0.0, None).sqrt() / mean)
    # Spec: "products with > 30% missing weeks": a product is missing in a week when no store
    # sold it, counted from the product's first week.
    missing_share = 1.0 - pl.col("product_obs_weeks") / (week - pl.col("product_first_week") + 1)
    rules = {
        "price_nonpositive": pl.col("actual_price") <= 0,
        "price_over_max": pl.col("actual_price") >= cfg.max_price,
        "depth_over_max": pl.col("discount_depth") >= cfg.max_depth,
        "base_price_decrease": pl.col("base_price") < pl.col("prev_base_price") - 0.005,
        "low_coverage": missing_share > cfg.max_missing_share,
        "high_volatility": cv > cfg.max_cv,
    }
    # One boolean per rule in a struct: typed, cheap, and readable from Polars or DuckDB
    # (`validation_flags.low_coverage`).
    flags = pl.struct([cond.fill_null(False).alias(name) for name, cond in rules.items()])
    n_flags = pl.sum_horizontal([cond.fill_null(False) for cond in rules.values()])
    base_quality = (pl.when(pl.col("imputation_method") == "observed")
                    .then(pl.when(pl.col("n_lines") >= 3).then(1.0).otherwise(0.85))
                    .when(pl.col("imputation_method") == "product_store_mean").then(0.6)
                    .when(pl.col("imputation_method") == "product_region_week_mean").then(0.45)
                    .otherwise(0.3))
    return priced.with_columns(validation_flags=flags, missing_share=missing_share, price_cv=cv,
                               quality_score=(base_quality - 0.1 * n_flags).clip(0.0, 1.0))
