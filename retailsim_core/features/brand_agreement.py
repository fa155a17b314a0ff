"""Pseudo-brands (design §3.2) against a source's real manufacturers, where a source has them
(The Complete Journey's ``manufacturer_id``; LGSR has none): adjusted Rand index and normalised
mutual information of the two partitions of the products, beside the same for the product type
alone, which is what pseudo-brands refine; and how the price tiers split National and Private
brands (a private label should sit in the cheaper tiers)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl


def _pairs(n: pl.Expr) -> pl.Expr:
    return n * (n - 1) / 2


def partition_agreement(labels: pl.DataFrame, a: str, b: str) -> dict[str, float]:
    """ARI and NMI (arithmetic normalisation) of columns ``a`` and ``b`` of ``labels``, one row
    per item; both are 1.0 for the same partition and about 0.0 for unrelated ones."""
    n = labels.height
    if n < 2:
        raise ValueError("agreement needs at least two items")
    cells = labels.group_by(a, b).len("n_ij")
    rows = labels.group_by(a).len("n_i")
    cols = labels.group_by(b).len("n_j")
    sum_ij = cells.select(_pairs(pl.col("n_ij")).sum()).item()
    sum_i = rows.select(_pairs(pl.col("n_i")).sum()).item()
    sum_j = cols.select(_pairs(pl.col("n_j")).sum()).item()
    expected = sum_i * sum_j / (n * (n - 1) / 2)
    top = (sum_i + sum_j) / 2 - expected
    ari = 1.0 if top == 0 else (sum_ij - expected) / top

    def entropy(counts: pl.DataFrame, col: str) -> float:
        p = counts[col].to_numpy() / n
        return float(-(p * np.log(p)).sum())

    joint = cells.join(rows, on=a).join(cols, on=b)
    mi = joint.select(
        (pl.col("n_ij") / n * (n * pl.col("n_ij") / (pl.col("n_i") * pl.col("n_j"))).log()).sum()
    ).item()
    h = (entropy(rows, "n_i") + entropy(cols, "n_j")) / 2
    nmi = 1.0 if h == 0 else mi / h
    return {"ari": float(ari), "nmi": float(max(0.0, min(1.0, nmi)))}


def brand_agreement(pseudo: pl.DataFrame, products: pl.DataFrame) -> dict:
    """``pseudo``: product_id, prod_code_10, pseudo_brand_id, price_tier (the pseudo_brands
    table); ``products``: product_id, manufacturer_id, brand (National / Private). Over the
    products in both with a manufacturer."""
    both = pseudo.select("product_id", "prod_code_10", "pseudo_brand_id", "price_tier").join(
        products.select("product_id", "manufacturer_id", "brand"), on="product_id"
    )
    both = both.filter(pl.col("manufacturer_id").is_not_null())
    tiers = (
        both.group_by("price_tier")
        .agg(pl.len().alias("products"), (pl.col("brand") == "Private").mean().alias("private"))
        .sort("price_tier")
    )
    return {
        "products": both.height,
        "manufacturers": both["manufacturer_id"].n_unique(),
        "pseudo_brand_ids": both["pseudo_brand_id"].n_unique(),
        "pseudo_brand_vs_manufacturer": partition_agreement(
            both, "pseudo_brand_id", "manufacturer_id"
        ),
        "product_type_vs_manufacturer": partition_agreement(
            both, "prod_code_10", "manufacturer_id"
        ),
        "private_share_by_tier": {
            r["price_tier"]: {"products": r["products"], "private": round(r["private"], 4)}
            for r in tiers.iter_rows(named=True)
        },
        "private_share": round(float((both["brand"] == "Private").mean() or math.nan), 4),
    }
