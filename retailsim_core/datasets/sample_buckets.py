"""Temporal metadata and bucketed samples (design §4.7.2 stages 1 and 3).

Week W's metadata describe its baskets from weeks < W only: how many trips and weeks of history
the customer has (the encoder sees trips, so buckets count trips; the spec's ``week - 1`` is kept
as ``history_length``), cold start (< 5 prior trips), and novel products (a product first sold
after the training weeks). Samples are the carded baskets; uncarded ones have no customer, no
history and no customer features, so they train nothing a sample needs (they still shape prices
and the product graph). A basket of more than 50 products is kept in every split, flagged
``truncated``: its 50 highest-priced products are its tokens, and the size head learns it as
"50 or more" (D120; design §4.7.5 case 5 skipped them in training as 0.1% of the data, they are
2% of The Complete Journey's baskets).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from retailsim_core.datasets.tokens import MAX_ITEMS
from retailsim_core.split import TemporalSplit

COLD_START_TRIPS = 5
# Bucket by prior trips: 0 | 1-4 | 5-19 | 20-49 | 50-99 | 100+ (lengths the encoder actually sees).
BUCKET_EDGES = (1, 5, 20, 50, 100)

METADATA_SCHEMA = pl.Schema(
    {
        "basket_id": pl.Int64,
        "customer_id": pl.String,
        "store_id": pl.String,
        "week": pl.Int16,
        "shop_date": pl.Date,
        "split": pl.String,
        "history_length": pl.Int16,
        "history_trips": pl.Int32,
        "history_weeks": pl.Int32,
        "bucket": pl.Int8,
        "is_cold_start": pl.Boolean,
        "is_novel_products": pl.Boolean,
        "num_products": pl.Int32,
        "total_spend": pl.Float64,
        "is_carded": pl.Boolean,
    }
)
SAMPLES_SCHEMA = pl.Schema(
    {
        "basket_id": pl.Int64,
        "customer_id": pl.String,
        "store_id": pl.String,
        "week": pl.Int16,
        "split": pl.String,
        "bucket": pl.Int8,
        "history_trips": pl.Int32,
        "is_cold_start": pl.Boolean,
        "is_novel_products": pl.Boolean,
        "num_products": pl.Int32,
        "truncated": pl.Boolean,
    }
)
_CUSTOMERS = pl.Schema({"customer_id": pl.String, "trips": pl.Int32, "weeks": pl.Int32})
_PRODUCTS = pl.Schema({"product_id": pl.String, "first_week": pl.Int16})


@dataclass
class HistoryState:
    customers: pl.DataFrame  # trips and weeks with a trip, per customer, over weeks < W
    products: pl.DataFrame  # first week each product was sold, over weeks < W

    @classmethod
    def empty(cls) -> HistoryState:
        return cls(_CUSTOMERS.to_frame(), _PRODUCTS.to_frame())


def bucket_of(trips: pl.Expr) -> pl.Expr:
    expr = pl.lit(0, pl.Int8)
    for i, edge in enumerate(BUCKET_EDGES, start=1):
        expr = pl.when(trips >= edge).then(pl.lit(i, pl.Int8)).otherwise(expr)
    return expr


def week_metadata(
    raw: pl.DataFrame, state: HistoryState, week: int, split: TemporalSplit
) -> pl.DataFrame:
    """Metadata of week W's baskets from ``raw`` (week W rows) and ``state`` (weeks < W)."""
    first_seen = (
        pl.concat(
            [state.products, raw.select("product_id", pl.lit(week, pl.Int16).alias("first_week"))]
        )
        .group_by("product_id")
        .agg(pl.col("first_week").min())
    )
    novel = first_seen.filter(pl.col("first_week") > split.train_end).select(
        "product_id", novel=pl.lit(True)
    )
    baskets = (
        raw.join(novel, on="product_id", how="left")
        .group_by("basket_id")
        .agg(
            pl.col("customer_id", "store_id", "shop_date").first(),
            pl.col("product_id").n_unique().cast(pl.Int32).alias("num_products"),
            pl.col("spend").sum().alias("total_spend"),
            pl.col("novel").any().alias("is_novel_products"),
        )
    )
    trips = pl.col("trips").fill_null(0)
    return (
        baskets.join(state.customers, on="customer_id", how="left")
        .with_columns(
            week=pl.lit(week, pl.Int16),
            split=pl.lit(split.split_of(week)),
            history_length=pl.lit(week - 1, pl.Int16),
            history_trips=trips,
            history_weeks=pl.col("weeks").fill_null(0),
            bucket=bucket_of(trips),
            is_cold_start=pl.col("customer_id").is_not_null() & (trips < COLD_START_TRIPS),
            is_novel_products=pl.col("is_novel_products").fill_null(False),
            is_carded=pl.col("customer_id").is_not_null(),
        )
        .select(METADATA_SCHEMA.names())
        .cast(dict(METADATA_SCHEMA))
        .sort("basket_id")
    )


def advance_history(state: HistoryState, raw: pl.DataFrame, week: int) -> HistoryState:
    """Fold week W's rows in, so the state covers weeks <= W."""
    carded = (
        raw.filter(pl.col("customer_id").is_not_null())
        .group_by("customer_id")
        .agg(
            pl.col("basket_id").n_unique().cast(pl.Int32).alias("trips"),
            pl.lit(1, pl.Int32).alias("weeks"),
        )
    )
    customers = (
        pl.concat([state.customers, carded.select(_CUSTOMERS.names())])
        .group_by("customer_id")
        .agg(pl.col("trips").sum(), pl.col("weeks").sum())
        .select(_CUSTOMERS.names())
    )
    products = (
        pl.concat(
            [state.products, raw.select("product_id", pl.lit(week, pl.Int16).alias("first_week"))]
        )
        .group_by("product_id")
        .agg(pl.col("first_week").min())
        .select(_PRODUCTS.names())
    )
    return HistoryState(customers=customers, products=products)


def samples_from_metadata(metadata: pl.DataFrame) -> pl.DataFrame:
    """Carded baskets; those over MAX_ITEMS products flagged ``truncated`` (D120)."""
    return (
        metadata.filter(pl.col("is_carded"))
        .with_columns(truncated=pl.col("num_products") > MAX_ITEMS)
        .select(SAMPLES_SCHEMA.names())
        .cast(dict(SAMPLES_SCHEMA))
        .sort("basket_id")
    )
