"""The mailer as the visit model reads it (issue #61, D132): how many products the week's mailer
holds, and which of them are a customer's own staples. Every value of week W is known before W:
the plan of W, purchases of weeks < W.

Glossary: U customers, P products, W weeks.
"""

from __future__ import annotations

import polars as pl

# Zero: the week without its mailer.
MAILER_FEATURES = ("mailer_products", "mailer_staples", "mailer_staple_share")
STAPLE_TRIPS = 2  # trips with a product before week W that make it one of the customer's staples


def mailer_products(plan: pl.LazyFrame) -> pl.LazyFrame:
    """week, mailer_products: the products the plan puts in the week's mailer (any store)."""
    return (
        plan.filter(pl.col("mailer"))
        .group_by(pl.col("week").cast(pl.Int16))
        .agg(mailer_products=pl.col("product_id").n_unique().cast(pl.Int32))
    )


def mailer_staples(
    panel: pl.LazyFrame, trips: pl.LazyFrame, plan: pl.LazyFrame, *, weeks: tuple[int, int]
) -> pl.LazyFrame:
    """customer_id, week, mailer_staples, mailer_staple_share for the ``panel`` rows of ``weeks``
    (first, last) with any: how many products of week W's mailer, at the stores of the region
    of the customer's last trip before W, they bought on ``STAPLE_TRIPS`` trips before W (their
    staples), and that count's share of all their staples before W. A source without regions (The
    Complete Journey) reads the mailer of any store. Cost grows with the customers' purchases
    and their staples, never with customers x products x weeks. (``trips``: customer_id,
    week, shop_date, shop_hour, basket_id, store_id, store_region, products; ``plan``: week,
    product_id, store_id, mailer.)"""
    lo, hi = weeks
    region = pl.col("store_region").fill_null("")
    stores = trips.select("store_id", region).unique("store_id")
    mailer = (
        plan.filter(pl.col("mailer") & pl.col("week").is_between(lo, hi))
        .join(stores, on="store_id")
        .select(pl.col("week").cast(pl.Int16), "product_id", "store_region")
        .unique()
    )
    staples = (
        trips.filter(pl.col("week") < hi)
        .select("customer_id", "week", pl.col("products").alias("product_id"))
        .explode("product_id", empty_as_null=False)
        .group_by("customer_id", "product_id")
        .agg(since=pl.col("week").sort().slice(STAPLE_TRIPS - 1, 1).first())
        .filter(pl.col("since").is_not_null())
    )
    # Each customer's staples known by a week: a count that grows with their history, so the
    # model reads the mailer's share of them (a count would take values no training week had).
    known = (
        staples.group_by("customer_id", "since")
        .agg(n=pl.len())
        .sort("customer_id", "since")
        .select(
            "customer_id",
            known=(pl.col("since") + 1).cast(pl.Int16),
            staples=pl.col("n").cum_sum().over("customer_id").cast(pl.Int32),
        )
    )
    # The region of each customer's last trip, known from the week after it.
    last = (
        trips.sort("customer_id", "shop_date", "shop_hour", "basket_id")
        .group_by("customer_id", "week", maintain_order=True)
        .agg(region.last())
        .select("customer_id", "store_region", known=(pl.col("week") + 1).cast(pl.Int16))
        .sort("customer_id", "known")
    )
    rows = (
        panel.filter(pl.col("week").is_between(lo, hi))
        .select("customer_id", pl.col("week").cast(pl.Int16))
        .pipe(_as_of, last)
        .select("customer_id", "week", "store_region")
    )
    return (
        staples.join(mailer, on="product_id")
        .filter(pl.col("week") > pl.col("since"))
        .join(rows, on=["customer_id", "week", "store_region"], how="semi")
        .group_by("customer_id", "week")
        .agg(mailer_staples=pl.len().cast(pl.Int32))
        .pipe(_as_of, known)
        .select(
            "customer_id",
            "week",
            "mailer_staples",
            mailer_staple_share=pl.col("mailer_staples") / pl.col("staples"),
        )
    )


def _as_of(rows: pl.LazyFrame, known: pl.LazyFrame) -> pl.LazyFrame:
    """``rows`` (customer_id, week) with the latest row of ``known`` (customer_id, known: the
    first week its values may be read, sorted) that week W may read: known <= W."""
    return rows.sort("customer_id", "week").join_asof(
        known, left_on="week", right_on="known", by="customer_id", strategy="backward",
        check_sortedness=False,  # both sorted: rows just above, known by its builder
    )  # fmt: skip
