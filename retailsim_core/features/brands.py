"""Pseudo-brands (design §3.2): price tier x substitution cluster within each sub-commodity.

- price tier: the product's percentile of mean training price within its sub-commodity,
  ``(rank - 1) / n`` so a category of n products splits 20/60/20 (value < 0.2 <= mid < 0.8 <=
  premium);
- substitution cluster: connected components of the substitution edges above a weight
  threshold (spec: epsilon > 0.5), labelled by their smallest product id (stable); products
  without such edges share their sub-commodity x tier brand (cluster "solo"), as the spec's
  store-brand example does — ~800 brands per 5,000 products, as §3.2.3 expects;
- ``pseudo_brand_key`` = "<CL>_<tier>_<cluster>" and ``pseudo_brand_id`` its dense rank in
  sorted key order: contiguous for an embedding table and identical in every process (no hash()).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

TIERS = ("value", "mid", "premium")

PSEUDO_BRANDS_SCHEMA = pl.Schema(
    {
        "product_id": pl.String,
        "prod_code_10": pl.String,
        "pseudo_brand_id": pl.Int32,
        "pseudo_brand_key": pl.String,
        "price_tier": pl.String,
        "category_positioning": pl.Float64,
        "mean_price": pl.Float64,
        "median_price": pl.Float64,
        "price_stability": pl.Float64,
        "substitution_group": pl.String,
        "competitive_intensity": pl.Int32,
        "market_share_proxy": pl.Float64,
    }
)


@dataclass(frozen=True)
class BrandConfig:
    value_quantile: float = 0.2
    premium_quantile: float = 0.8
    cluster_min_weight: float = 0.5  # spec: strong substitution edges (epsilon > 0.5)


def product_price_stats(weekly_prices: pl.LazyFrame) -> pl.LazyFrame:
    """``weekly_prices``: observed cells (product_id, week, actual_price) of the training weeks.
    Mean, median and the CV of the product's weekly chain-mean price over time."""
    # Float sums in a fixed order (D47): a multi-threaded group-by hands each group its rows in a
    # run-dependent order, and the optimizer drops sorts before plain aggregations. Each group's
    # values are gathered into a sorted list (an order the plan must keep) and reduced there.
    weekly = (
        weekly_prices.group_by("product_id", "week")
        .agg(pl.col("actual_price").sort().alias("prices"))
        .select("product_id", "week", pl.col("prices").list.mean().alias("p"))
    )
    stats = (
        weekly_prices.group_by("product_id")
        .agg(pl.col("actual_price").sort().alias("prices"))
        .select(
            "product_id",
            pl.col("prices").list.mean().alias("mean_price"),
            pl.col("prices").list.median().alias("median_price"),
        )
    )
    ps = pl.col("ps")
    cv = (
        weekly.group_by("product_id")
        .agg(pl.col("p").sort().alias("ps"))
        .select(
            "product_id", (ps.list.std() / ps.list.mean()).fill_null(0.0).alias("price_stability")
        )
    )
    return stats.join(cv, on="product_id", how="left")


def substitution_clusters(products: pl.Series, edges: pl.DataFrame, min_weight: float) -> pl.Series:
    """Per product (in ``products`` order) the smallest product id of its substitution component,
    or null for a product without strong substitution edges."""
    index = pl.DataFrame({"product_id": products, "i": np.arange(len(products))})
    strong = (
        edges.filter((pl.col("edge_type") == "substitution") & (pl.col("weight") > min_weight))
        .join(index, left_on="src", right_on="product_id")
        .join(index, left_on="dst", right_on="product_id", suffix="_d")
    )
    n = len(products)
    adj = sp.coo_matrix(
        (np.ones(strong.height), (strong["i"].to_numpy(), strong["i_d"].to_numpy())), shape=(n, n)
    )
    _, labels = connected_components(adj, directed=False)
    frame = pl.DataFrame({"product_id": products, "component": labels})
    group = pl.when(pl.len().over("component") > 1).then(
        pl.col("product_id").min().over("component")
    )
    return frame.select(group.alias("substitution_group"))["substitution_group"]


def pseudo_brands(
    products: pl.DataFrame,
    price_stats: pl.DataFrame,
    units: pl.DataFrame,
    edges: pl.DataFrame,
    cfg: BrandConfig = BrandConfig(),
) -> pl.DataFrame:
    """``products``: product_id, prod_code_10 (training products); ``units``: product_id, units."""
    base = (
        products.join(price_stats, on="product_id", how="left")
        .join(units, on="product_id", how="left")
        .sort("product_id")
    )
    rank = pl.col("mean_price").rank("ordinal").over("prod_code_10")
    count = pl.col("mean_price").count().over("prod_code_10")
    pct = ((rank - 1) / count).alias("category_positioning")
    tier = (
        pl.when(pl.col("category_positioning").is_null())
        .then(pl.lit("mid"))  # no training price
        .when(pl.col("category_positioning") < cfg.value_quantile)
        .then(pl.lit("value"))
        .when(pl.col("category_positioning") >= cfg.premium_quantile)
        .then(pl.lit("premium"))
        .otherwise(pl.lit("mid"))
    )
    subs = edges.filter(pl.col("edge_type") == "substitution")
    degree = (
        pl.concat(
            [
                subs.select(pl.col("src").alias("product_id")),
                subs.select(pl.col("dst").alias("product_id")),
            ]
        )
        .group_by("product_id")
        .len("competitive_intensity")
    )
    out = (
        base.with_columns(pct)
        .with_columns(
            price_tier=tier,
            substitution_group=substitution_clusters(
                base["product_id"], edges, cfg.cluster_min_weight
            ),
        )
        .join(degree, on="product_id", how="left")
        .with_columns(
            competitive_intensity=pl.col("competitive_intensity").fill_null(0),
            market_share_proxy=pl.col("units").fill_null(0)
            / pl.col("units").fill_null(0).sum().over("prod_code_10"),
            pseudo_brand_key=pl.concat_str(
                ["prod_code_10", "price_tier", pl.col("substitution_group").fill_null("solo")],
                separator="_",
            ),
        )
    )
    return (
        out.with_columns(
            pseudo_brand_id=pl.col("pseudo_brand_key").rank("dense").cast(pl.Int32) - 1
        )
        .select(PSEUDO_BRANDS_SCHEMA.names())
        .cast(dict(PSEUDO_BRANDS_SCHEMA))
    )
