"""Weekly feature tables: price features (design §3.3 inputs, T4) and store features
(design §4.6, T5).

Price features of week W use the week's derived prices and the cell's own previous weeks only.
Store features of week W describe the stores seen in weeks < W, plus format x region fallback
rows for stores that open later.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from retailsim_core.features.seen_pairs import SeenPairs
from retailsim_core.ingest.lgsr import STORE_FORMAT_CODES, STORE_REGION_CODES

PRICE_FEATURES_SCHEMA = pl.Schema(
    {
        "product_id": pl.String,
        "store_id": pl.String,
        "prod_code_10": pl.String,
        "week": pl.Int16,
        "shop_week": pl.Int32,
        "actual_price": pl.Float64,
        "log_price": pl.Float64,
        "relative_price": pl.Float64,
        "price_velocity": pl.Float64,
        "price_acceleration": pl.Float64,
        "promo_momentum": pl.Int16,
        "discount_depth": pl.Float64,
        "promo_flag": pl.Boolean,
        "has_prior_price": pl.Boolean,
        "is_imputed_price": pl.Boolean,
    }
)


# The previous week's state the joined reference reads (``PriceFeatureCarry`` keeps it by slot).
PRICE_STATE_SCHEMA = pl.Schema(
    {
        "product_id": pl.String,
        "store_id": pl.String,
        "prev_log_price": pl.Float64,
        "prev_velocity": pl.Float64,
        "prev_momentum": pl.Int16,
    }
)


def next_price_state(features: pl.DataFrame) -> pl.DataFrame:
    return features.select(
        "product_id",
        "store_id",
        pl.col("log_price").alias("prev_log_price"),
        pl.col("price_velocity").alias("prev_velocity"),
        pl.col("promo_momentum").alias("prev_momentum"),
    )


def price_features(
    prices: pl.DataFrame, categories: pl.DataFrame, prev: pl.DataFrame
) -> pl.DataFrame:
    """``prices``: one week of derived_prices; ``categories``: product_id -> prod_code_10;
    ``prev``: the previous week's (product, store, prev_log_price, prev_velocity, prev_momentum).
    The reference of :class:`PriceFeatureCarry` (which aligns by slot instead of joining), sorted
    by product and store; the columns are :func:`feature_columns`'."""
    joined = prices.join(categories, on="product_id", how="left").join(
        prev, on=["product_id", "store_id"], how="left"
    )
    return feature_columns(joined).sort("product_id", "store_id")


def feature_columns(cells: pl.DataFrame) -> pl.DataFrame:
    """PRICE_FEATURES_SCHEMA from one week's cells with their sub-commodity and previous state:

    - log_price = ln(actual price); velocity = log_price - previous week's log_price (0 in the
      cell's first week, ``has_prior_price`` false); acceleration = velocity - previous velocity;
    - relative_price = price / mean price of the cells of the same sub-commodity in the same
      store that week (the store's assortment to date, observed or imputed);
    - promo_momentum = consecutive weeks the cell has been on promotion, this week included;
    - a price <= 0 (free items, data errors) is replaced by the median positive price of the
      sub-commodity in that store-week, else of the sub-commodity that week, and flagged
      ``is_imputed_price`` (design §4.7.5 case 6): log prices stay finite.
    """
    log_price = pl.col("actual_price").log()
    has_prior = pl.col("prev_log_price").is_not_null()
    velocity = pl.when(has_prior).then(log_price - pl.col("prev_log_price")).otherwise(0.0)
    positive = pl.when(pl.col("actual_price") > 0).then(pl.col("actual_price"))
    imputed = ~(pl.col("actual_price") > 0).fill_null(False)
    cells = cells.with_columns(is_imputed_price=imputed)
    if cells["is_imputed_price"].any():  # the medians only where a price needs one
        cells = cells.with_columns(
            actual_price=pl.coalesce(
                positive,
                positive.median().over("store_id", "prod_code_10"),
                positive.median().over("prod_code_10"),
                positive.median(),
            )
        )
    return (
        cells.with_columns(
            log_price=log_price,
            relative_price=pl.col("actual_price")
            / pl.col("actual_price").mean().over("store_id", "prod_code_10"),
            price_velocity=velocity,
            price_acceleration=velocity - pl.col("prev_velocity").fill_null(0.0),
            promo_momentum=pl.when(pl.col("promo_flag"))
            .then(pl.col("prev_momentum").fill_null(0) + 1)
            .otherwise(0),
            has_prior_price=has_prior,
        )
        .select(PRICE_FEATURES_SCHEMA.names())
        .cast(dict(PRICE_FEATURES_SCHEMA))
    )


@dataclass
class PriceFeatureCarry:
    """Price features week after week from dense derived-price tables in slot order (D96).

    Slots never move and only grow (``prices.cells``), so the previous week's state of a cell is
    at its slot: no join on product and store, no sort. ``categories``: product_id ->
    prod_code_10 for every product the tables will hold.
    """

    categories: pl.DataFrame
    codes: pl.Series = field(default_factory=lambda: pl.Series("prod_code_10", [], pl.String))
    prev: pl.DataFrame = field(default_factory=lambda: _CARRIED.to_frame())

    def week(self, prices: pl.DataFrame) -> pl.DataFrame:
        """Week W's features (PRICE_FEATURES_SCHEMA, slot order) from its dense table."""
        n, m = prices.height, self.prev.height
        if n < m:
            raise ValueError("price tables must be consecutive weeks of one replay, in slot order")
        fresh = (
            prices.slice(m)
            .select("product_id")
            .join(self.categories, on="product_id", how="left", maintain_order="left")
        )
        self.codes = pl.concat([self.codes, fresh["prod_code_10"]], rechunk=False)
        prev = pl.concat([self.prev, _nulls(n - m)])  # new cells have no previous week
        features = feature_columns(
            prices.select(_PRICE_INPUTS).hstack([self.codes.alias("prod_code_10"), *prev])
        )
        self.prev = next_price_state(features).select(_CARRIED.names())
        return features


_PRICE_INPUTS = (
    "product_id",
    "store_id",
    "week",
    "shop_week",
    "actual_price",
    "discount_depth",
    "promo_flag",
)
_CARRIED = pl.Schema({k: v for k, v in PRICE_STATE_SCHEMA.items() if k.startswith("prev_")})


def _nulls(n: int) -> pl.DataFrame:
    return pl.DataFrame([pl.Series(k, [None] * n, v) for k, v in _CARRIED.items()])


STORE_FEATURES_SCHEMA = pl.Schema(
    {
        "store_id": pl.String,
        "week": pl.Int16,
        "store_format": pl.String,
        "store_region": pl.String,
        "traffic": pl.Float64,
        "size_proxy": pl.Float64,
        "regional_competition": pl.Float64,
        "age": pl.Float64,
        "traffic_baskets_per_week": pl.Float64,
        "distinct_products": pl.Int32,
        "stores_in_region": pl.Int32,
        "age_weeks": pl.Int16,
        "is_new_store": pl.Boolean,
    }
)
_STORES = pl.Schema(
    {
        "store_id": pl.String,
        "store_format": pl.String,
        "store_region": pl.String,
        "first_week": pl.Int16,
        "baskets": pl.Int64,
    }
)
_DISTINCT = pl.Schema({"store_id": pl.String, "distinct_products": pl.UInt32})


@dataclass
class StoreState:
    stores: pl.DataFrame  # _STORES: per store seen, first week and baskets to date
    seen: SeenPairs  # distinct (store, product) pairs to date; grows in place as weeks fold in
    distinct: pl.DataFrame  # _DISTINCT: per store, its distinct products to date

    @classmethod
    def empty(cls) -> StoreState:
        return cls(_STORES.to_frame(), SeenPairs(), _DISTINCT.to_frame())


def advance_stores(state: StoreState, week_rows: pl.DataFrame, week: int) -> StoreState:
    """Fold one week of raw rows (store_id, store_format, store_region, basket_id, product_id)
    in; the returned state shares ``state.seen``, which gains the week's pairs. Only the week's
    new pairs are counted, found by a lookup per pair (``SeenPairs``), not a pass over every
    pair to date."""
    seen = week_rows.group_by("store_id").agg(
        pl.col("store_format").first(),
        pl.col("store_region").first(),
        pl.col("basket_id").n_unique().cast(pl.Int64).alias("baskets"),
    )
    stores = (
        pl.concat(
            [
                state.stores,
                seen.with_columns(first_week=pl.lit(week, pl.Int16)).select(_STORES.names()),
            ]
        )
        .group_by("store_id")
        .agg(
            pl.col("store_format").first(),
            pl.col("store_region").first(),
            pl.col("first_week").min(),
            pl.col("baskets").sum(),
        )
        .select(_STORES.names())
        .sort("store_id")
    )
    new = state.seen.add(week_rows)
    distinct = (
        pl.concat([state.distinct, new.group_by("store_id").len("distinct_products")])
        .cast(dict(_DISTINCT))
        .group_by("store_id")
        .agg(pl.col("distinct_products").sum())
    )
    return StoreState(stores=stores, seen=state.seen, distinct=distinct)


def store_features(state: StoreState, week: int) -> pl.DataFrame:
    """Features of week W from ``state`` (weeks < W): one row per store seen before W, plus one
    fallback row per format x region (``store_id`` null, ``is_new_store``) holding the mean of the
    known stores of that format and region (else of that format, else of all) for stores that
    open later (design §4.7.5 case 4). Each feature is normalised to [0, 1] by its largest value
    across that week's rows."""
    known = state.stores.join(state.distinct, on="store_id", how="left")
    known = known.with_columns(
        traffic_baskets_per_week=pl.col("baskets") / (week - pl.col("first_week")),
        stores_in_region=pl.len().over("store_region"),
        age_weeks=(week - pl.col("first_week")).cast(pl.Int16),
        is_new_store=pl.lit(False),
    )
    grid = pl.DataFrame({"store_format": STORE_FORMAT_CODES}).join(
        pl.DataFrame({"store_region": STORE_REGION_CODES}), how="cross"
    )

    def means(keys, suffix):
        return known.group_by(keys).agg(
            pl.col("traffic_baskets_per_week").mean().alias(f"t{suffix}"),
            pl.col("distinct_products").mean().alias(f"d{suffix}"),
        )

    overall = known.select(
        pl.col("traffic_baskets_per_week").mean().alias("t_all"),
        pl.col("distinct_products").mean().alias("d_all"),
    )
    fallback = (
        grid.join(
            means(["store_format", "store_region"], "_fr"),
            on=["store_format", "store_region"],
            how="left",
        )
        .join(means(["store_format"], "_f"), on="store_format", how="left")
        .join(overall, how="cross")
        .join(known.group_by("store_region").len("stores_in_region"), on="store_region", how="left")
        .with_columns(
            store_id=pl.lit(None, pl.String),
            traffic_baskets_per_week=pl.coalesce("t_fr", "t_f", "t_all", pl.lit(0.0)),
            distinct_products=pl.coalesce("d_fr", "d_f", "d_all", pl.lit(0.0)),
            stores_in_region=pl.col("stores_in_region").fill_null(0),
            age_weeks=pl.lit(0, pl.Int16),
            is_new_store=pl.lit(True),
        )
    )
    cols = [
        "store_id",
        "store_format",
        "store_region",
        "traffic_baskets_per_week",
        "distinct_products",
        "stores_in_region",
        "age_weeks",
        "is_new_store",
    ]
    both = pl.concat([known.select(cols), fallback.select(cols)], how="vertical_relaxed")

    def norm(c):
        return (pl.col(c) / pl.col(c).max()).fill_nan(0.0).fill_null(0.0)

    return (
        both.with_columns(
            week=pl.lit(week, pl.Int16),
            traffic=norm("traffic_baskets_per_week"),
            size_proxy=norm("distinct_products"),
            regional_competition=norm("stores_in_region"),
            age=norm("age_weeks"),
        )
        .select(STORE_FEATURES_SCHEMA.names())
        .cast(dict(STORE_FEATURES_SCHEMA))
        .sort("is_new_store", "store_id", "store_format", "store_region", nulls_last=True)
    )
