"""The price formulas as Polars joins over the observed history: the oracle for ``cells``.

Week W joins its cells (the assortment to date, carried with cumulative statistics) to group-bys
over the observed prices of the reference lookback. Easy to read and to check by hand, but each
week re-aggregates ~26 weeks of observations; ``cells.py`` computes the same table from
slot-aligned arrays and is tested against this one.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from retailsim_core.calendar import shop_week_of
from retailsim_core.derived_prices import (
    BASE_WINDOW,
    DERIVED_PRICES_SCHEMA,
    FORMAT_INDEX,
    IMPUTATION_METHODS,
    OBSERVED_SCHEMA,
    REGION_INDEX,
    STORE_SPAN,
    UNKNOWN_FORMAT,
    UNKNOWN_REGION,
    VALIDATION_FLAG_BITS,
    PriceConfig,
    cell_codes,
    zone_of,
)

PREV_PRICES = [f"prev_price_{k}" for k in range(1, BASE_WINDOW)]
CELL = ["cell", "product_num", "product_id", "store_id"]  # cell is the key; the rest ride along
CUMULATIVE_SCHEMA = pl.Schema(
    {
        "cell": pl.Int64,
        "product_num": pl.Int64,
        "product_id": pl.String,
        "store_id": pl.String,
        "store_region": pl.String,
        "store_format": pl.String,
        "first_week": pl.Int16,
        "n_obs_to_date": pl.Int32,
        "price_sum_to_date": pl.Float64,
        "price_sumsq_to_date": pl.Float64,
        **{c: pl.Float64 for c in PREV_PRICES},
        "prev_base_price": pl.Float64,
    }
)
_PRODUCTS = pl.Schema(
    {"product_num": pl.Int64, "product_first_week": pl.Int16, "product_obs_weeks": pl.Int32}
)


def zone_key() -> pl.Expr:
    """Exact integer key of (product, region, format): a pricing zone of one product."""
    region = pl.col("store_region").replace_strict(REGION_INDEX, return_dtype=pl.Int64)
    fmt = pl.col("store_format").replace_strict(FORMAT_INDEX, return_dtype=pl.Int64)
    region, fmt = region.fill_null(UNKNOWN_REGION), fmt.fill_null(UNKNOWN_FORMAT)
    return zone_of(pl.col("product_num"), region, fmt).alias("zone")


@dataclass
class PriceState:
    """What week W+1 needs from weeks <= W."""

    cumulative: pl.DataFrame  # CUMULATIVE_SCHEMA, one row per cell of the assortment to date
    history: pl.DataFrame  # observed rows (with product_num) of the last `history_weeks` weeks
    products: pl.DataFrame  # _PRODUCTS: chain-wide weeks observed per product

    @classmethod
    def empty(cls) -> PriceState:
        history = pl.Schema({**OBSERVED_SCHEMA, "product_num": pl.Int64}).to_frame()
        return cls(CUMULATIVE_SCHEMA.to_frame(), history, _PRODUCTS.to_frame())


def cell_history_stats(
    history: pl.LazyFrame, week: int, cfg: PriceConfig
) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """Per cell the reference max and count over the reference lookback and the level-2 mean over
    the last ``store_mean_window`` weeks; per pricing zone the reference max."""
    recent = history.filter(pl.col("week") > week - cfg.reference_window)
    in_l2 = pl.col("week") > week - cfg.store_mean_window
    own = recent.group_by("cell").agg(
        pl.col("observed_price").max().alias("own_max"),
        pl.len().alias("own_n"),
        pl.col("observed_price").filter(in_l2).mean().alias("l2"),
    )
    zone = (
        recent.with_columns(zone_key())
        .group_by("zone")
        .agg(pl.col("observed_price").max().alias("zone_max"))
    )
    return own, zone


def waterfall(cells: pl.LazyFrame, observed: pl.LazyFrame, own: pl.LazyFrame) -> pl.LazyFrame:
    """Step 4: observed, else (product, store) recent mean -> (product, region, week) mean ->
    (product) chain mean to date. Every average uses weeks <= W only."""
    region_mean = observed.group_by("product_num", "store_region").agg(
        pl.col("observed_price").mean().alias("l3")
    )
    chain_mean = cells.group_by("product_num").agg(
        (pl.col("price_sum_to_date").sum() / pl.col("n_obs_to_date").sum()).alias("l4")
    )
    levels = [pl.col("observed_price"), pl.col("l2"), pl.col("l3"), pl.col("l4")]
    method = pl.when(levels[0].is_not_null()).then(pl.lit(IMPUTATION_METHODS[0]))
    for level, name in zip(levels[1:], IMPUTATION_METHODS[1:], strict=True):
        method = method.when(level.is_not_null()).then(pl.lit(name))
    return (
        cells.join(
            observed.select("cell", "observed_price", "regular_price", "n_lines", "units"),
            on="cell",
            how="left",
        )
        .join(own, on="cell", how="left")
        .join(region_mean, on=["product_num", "store_region"], how="left", nulls_equal=True)
        .join(chain_mean, on="product_num", how="left")
        .with_columns(pl.coalesce(levels).alias("actual_price"), method.alias("imputation_method"))
        .drop("l2", "l3", "l4")
    )


def promotions(priced: pl.LazyFrame, cfg: PriceConfig) -> pl.LazyFrame:
    """Step 3 with the documented reference: depth and promo flag for observed cells."""
    own_ok = pl.col("own_n") >= cfg.min_own_observations
    inferred = (
        pl.when(own_ok).then(pl.col("own_max")).otherwise(pl.max_horizontal("own_max", "zone_max"))
    )
    reference = pl.coalesce("regular_price", inferred)  # the source's regular price (D90)
    observed = pl.col("observed_price").is_not_null()
    depth = pl.when(observed).then(
        (1.0 - pl.col("observed_price") / pl.col("reference_price")).clip(0.0, 1.0)
    )
    return (
        priced.with_columns(reference_price=reference)
        .with_columns(
            discount_depth=depth.fill_null(0.0),
            base_discount_depth=(1.0 - pl.col("actual_price") / pl.col("base_price")).clip(
                0.0, 1.0
            ),
        )
        .with_columns(promo_flag=pl.col("discount_depth") > cfg.promo_threshold)
    )


def validation(priced: pl.LazyFrame, week: int, cfg: PriceConfig) -> pl.LazyFrame:
    """Step 5: business-rule flags (one bit each) and a quality score in [0, 1]."""
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
    broken = [cond.fill_null(False) for cond in rules.values()]
    flags = pl.sum_horizontal(
        [
            b.cast(pl.UInt8) * VALIDATION_FLAG_BITS[name]
            for name, b in zip(rules, broken, strict=True)
        ]
    )
    base_quality = (
        pl.when(pl.col("imputation_method") == "observed")
        .then(pl.when(pl.col("n_lines") >= 3).then(1.0).otherwise(0.85))
        .when(pl.col("imputation_method") == "product_store_mean")
        .then(0.6)
        .when(pl.col("imputation_method") == "product_region_week_mean")
        .then(0.45)
        .otherwise(0.3)
    )
    return priced.with_columns(
        validation_flags=flags.cast(pl.UInt8),
        missing_share=missing_share,
        price_cv=cv,
        quality_score=(base_quality - 0.1 * pl.sum_horizontal(broken)).clip(0.0, 1.0),
    )


def _accumulate(cumulative: pl.DataFrame, observed: pl.DataFrame, week: int) -> pl.DataFrame:
    obs = observed.select(
        *CELL,
        pl.col("store_region").alias("r"),
        pl.col("store_format").alias("f"),
        "observed_price",
    )
    p, seen = pl.col("observed_price"), pl.col("observed_price").is_not_null()
    return (
        cumulative.join(obs, on=CELL, how="full", coalesce=True)
        .select(
            *CELL,
            pl.coalesce("r", "store_region").alias("store_region"),
            pl.coalesce("f", "store_format").alias("store_format"),
            pl.coalesce("first_week", pl.lit(week)).cast(pl.Int16).alias("first_week"),
            (pl.col("n_obs_to_date").fill_null(0) + seen.cast(pl.Int32)).alias("n_obs_to_date"),
            (pl.col("price_sum_to_date").fill_null(0.0) + p.fill_null(0.0)).alias(
                "price_sum_to_date"
            ),
            (pl.col("price_sumsq_to_date").fill_null(0.0) + (p * p).fill_null(0.0)).alias(
                "price_sumsq_to_date"
            ),
            *PREV_PRICES,
            "prev_base_price",
        )
        .sort("cell")
    )


def derive_week(
    state: PriceState, observed: pl.DataFrame, week: int, cfg: PriceConfig
) -> tuple[pl.DataFrame, PriceState]:
    """Week W's derived prices (sorted by cell) from its observed prices and the state of weeks <
    W.
    """
    observed = observed.with_columns(
        (pl.col("cell") // STORE_SPAN).alias("product_num"), *cell_codes()
    )
    cumulative = _accumulate(state.cumulative, observed, week)
    seen = (
        observed.select("product_num")
        .unique()
        .with_columns(
            product_first_week=pl.lit(week, pl.Int16), product_obs_weeks=pl.lit(1, pl.Int32)
        )
    )
    products = (
        pl.concat([state.products, seen])
        .group_by("product_num")
        .agg(pl.col("product_first_week").min(), pl.col("product_obs_weeks").sum())
        .sort("product_num")
    )
    history = pl.concat(
        [
            state.history.filter(pl.col("week") > week - cfg.history_weeks),
            observed.select(state.history.columns),
        ]
    )
    own, zone = cell_history_stats(history.lazy(), week, cfg)
    table = (
        waterfall(cumulative.lazy(), observed.lazy(), own)
        .with_columns(base_price=pl.max_horizontal("actual_price", *PREV_PRICES))
        .with_columns(zone_key())
        .join(zone, on="zone", how="left")
        .join(products.lazy(), on="product_num", how="left")
        .pipe(promotions, cfg)
        .pipe(validation, week, cfg)
        .with_columns(week=pl.lit(week, pl.Int16), shop_week=pl.lit(shop_week_of(week), pl.Int32))
        .sort("cell")
        .collect()
    )
    shifted = {
        "prev_price_1": pl.col("actual_price"),
        "prev_base_price": pl.col("base_price"),
        **{PREV_PRICES[k]: pl.col(PREV_PRICES[k - 1]) for k in range(1, len(PREV_PRICES))},
    }
    new_state = PriceState(
        table.with_columns(**shifted).select(CUMULATIVE_SCHEMA.names()), history, products
    )
    return table.select(DERIVED_PRICES_SCHEMA.names()).cast(dict(DERIVED_PRICES_SCHEMA)), new_state
