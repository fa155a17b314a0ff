"""Product graph (design §2.3): co-purchase, substitution and hierarchy edges as Parquet tables.

All pair statistics come from sparse matrix products, never loops over pairs:

- co-purchase: ``C = Xᵀ X`` with X the basket × product incidence matrix; lift, a 2×2
  chi-square test and top-K per product;
- substitution: by default switching tests on the data (``substitution.py``); the spec's rule,
  customer overlap ``Yᵀ Y`` with Y the customer × product incidence matrix, computed block by
  block within each sub-commodity (candidates never cross one), is kept as an option;
- hierarchy: PRD→CL→DEP→G→D with weights 1, 0.5, 0.25, 0.125.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import polars as pl
import scipy.sparse as sp
from scipy.stats import chi2

HIERARCHY_LEVELS = ("product_id", "prod_code_10", "prod_code_20", "prod_code_30", "prod_code_40")
HIERARCHY_WEIGHTS = (1.0, 0.5, 0.25, 0.125)

NODES_SCHEMA = pl.Schema(
    {
        "node_id": pl.String,
        "node_type": pl.String,
        "hierarchy_level": pl.Int8,
        "price_tier": pl.String,
        "category_path": pl.String,
        "mean_price": pl.Float64,
        "n_baskets": pl.Int64,
    }
)
EDGES_SCHEMA = pl.Schema(
    {
        "src": pl.String,
        "dst": pl.String,
        "edge_type": pl.String,
        "weight": pl.Float64,
        "directed": pl.Boolean,
        "count": pl.Int64,
        "lift": pl.Float64,
        "chi2": pl.Float64,
        "p_value": pl.Float64,
        "jaccard": pl.Float64,
        "price_gap": pl.Float64,
    }
)


@dataclass(frozen=True)
class GraphConfig:
    min_lift: float = 1.5  # co-purchase: lift > 1.5
    min_count: int = 50  # co-purchase: > 50 baskets together
    max_p_value: float = 0.05  # co-purchase: chi-square p < 0.05
    top_k: int = 15  # co-purchase: strongest 15 per product
    substitution_rule: str = "switching"  # "switching": tests on the data (substitution.py, D60);
    # "spec": the three thresholds below (design §2.3)
    substitution_fdr: float = 0.05  # switching: false-discovery rate of the two tests
    min_jaccard: float = 0.6  # spec rule: customer Jaccard > 0.6
    max_sub_lift: float = 1.2  # spec rule: lift < 1.2
    max_price_gap: float = 0.3  # spec rule: |pa - pb| / mean < 0.3
    value_tier_quantile: float = 0.2
    premium_tier_quantile: float = 0.8

    def __post_init__(self):
        if self.substitution_rule not in ("switching", "spec"):
            raise ValueError(
                f"substitution_rule {self.substitution_rule!r}: use 'switching' or 'spec'"
            )


def incidence(rows: pl.Series, cols: pl.Series, n_rows: int, n_cols: int) -> sp.csr_matrix:
    """Binary CSR matrix with a 1 at each distinct (row, col)."""
    data = np.ones(len(rows), dtype=np.float32)
    m = sp.csr_matrix((data, (rows.to_numpy(), cols.to_numpy())), shape=(n_rows, n_cols))
    m.data[:] = 1.0  # duplicates were summed; presence is what counts
    return m


def copurchase_stats(baskets: sp.csr_matrix) -> tuple[sp.coo_matrix, np.ndarray, int]:
    """(co-occurrence counts of product pairs i < j, basket count per product, number of
    baskets).
    """
    counts = (baskets.T @ baskets).tocoo()
    support = np.asarray(baskets.sum(axis=0)).ravel()
    upper = counts.row < counts.col
    return (
        sp.coo_matrix(
            (counts.data[upper], (counts.row[upper], counts.col[upper])), shape=counts.shape
        ),
        support,
        baskets.shape[0],
    )


def lift_and_chi2(count: np.ndarray, sup_a: np.ndarray, sup_b: np.ndarray, n: int):
    """Lift = P(A∩B) / (P(A) P(B)); Pearson chi-square of the 2×2 basket table (1 dof)."""
    a = count.astype(np.float64)
    b, c = sup_a - a, sup_b - a
    d = n - a - b - c
    lift = a * n / (sup_a.astype(np.float64) * sup_b)
    denom = (a + b) * (c + d) * (a + c) * (b + d)
    stat = np.where(denom > 0, n * (a * d - b * c) ** 2 / np.where(denom > 0, denom, 1.0), 0.0)
    return lift, stat, chi2.sf(stat, 1)


def copurchase_edges(
    products: pl.Series, counts: sp.coo_matrix, support: np.ndarray, n: int, cfg: GraphConfig
) -> pl.DataFrame:
    i, j, c = counts.row, counts.col, counts.data
    lift, stat, p = lift_and_chi2(c, support[i], support[j], n)
    keep = (lift > cfg.min_lift) & (c > cfg.min_count) & (p < cfg.max_p_value)
    cand = pl.DataFrame(
        {
            "i": i[keep],
            "j": j[keep],
            "count": c[keep].astype(np.int64),
            "lift": lift[keep],
            "chi2": stat[keep],
            "p_value": p[keep],
        }
    )
    # Top-K per product: a pair stays if it is among the K strongest of either endpoint.
    both = pl.concat(
        [
            cand.select(pl.col("i").alias("node"), "i", "j", "lift"),
            cand.select(pl.col("j").alias("node"), "i", "j", "lift"),
        ]
    )
    ranked = both.with_columns(rank=pl.col("lift").rank("ordinal", descending=True).over("node"))
    kept = ranked.filter(pl.col("rank") <= cfg.top_k).select("i", "j").unique()
    names = products.to_numpy()
    out = cand.join(kept, on=["i", "j"], how="semi").sort("i", "j")
    return pl.DataFrame(
        {
            "src": names[out["i"].to_numpy()],
            "dst": names[out["j"].to_numpy()],
            "edge_type": "copurchase",
            "weight": out["lift"],
            "directed": False,
            "count": out["count"],
            "lift": out["lift"],
            "chi2": out["chi2"],
            "p_value": out["p_value"],
            "jaccard": None,
            "price_gap": None,
        },
        schema=EDGES_SCHEMA,
    )


def substitution_edges(
    products: pl.DataFrame,
    customers: sp.csc_matrix,
    counts: sp.coo_matrix,
    support: np.ndarray,
    n_baskets: int,
    cfg: GraphConfig,
) -> pl.DataFrame:
    """``products``: idx-ordered frame with product_id, prod_code_10 and mean_price."""
    cust_support = np.asarray(customers.sum(axis=0)).ravel()
    frames = []
    for _, block in products.with_row_index("idx").group_by("prod_code_10", maintain_order=True):
        idx = block["idx"].to_numpy()
        if len(idx) < 2:
            continue
        sub = customers[:, idx]
        inter = (sub.T @ sub).toarray()  # (k, k) shared customers
        a, b = np.triu_indices(len(idx), k=1)
        shared = inter[a, b]
        union = cust_support[idx[a]] + cust_support[idx[b]] - shared
        frames.append(
            pl.DataFrame(
                {
                    "i": idx[a],
                    "j": idx[b],
                    "jaccard": np.where(union > 0, shared / np.maximum(union, 1), 0.0),
                }
            )
        )
    if not frames:
        return EDGES_SCHEMA.to_frame()
    pair_counts = pl.DataFrame(
        {"i": counts.row, "j": counts.col, "together": counts.data.astype(np.int64)},
        schema={"i": pl.Int64, "j": pl.Int64, "together": pl.Int64},
    )
    cand = (
        pl.concat(frames)
        .filter(pl.col("jaccard") > cfg.min_jaccard)
        .with_columns(pl.col("i").cast(pl.Int64), pl.col("j").cast(pl.Int64))
        .join(pair_counts, on=["i", "j"], how="left")
        .with_columns(pl.col("together").fill_null(0))
    )
    i, j = cand["i"].to_numpy(), cand["j"].to_numpy()
    together = cand["together"].to_numpy()
    lift, _, _ = lift_and_chi2(together, support[i], support[j], n_baskets)
    price = products["mean_price"].to_numpy()
    gap = np.abs(price[i] - price[j]) / ((price[i] + price[j]) / 2)
    keep = (lift < cfg.max_sub_lift) & (gap < cfg.max_price_gap)
    names = products["product_id"].to_numpy()
    jac = cand["jaccard"].to_numpy()[keep]
    return pl.DataFrame(
        {
            "src": names[i[keep]],
            "dst": names[j[keep]],
            "edge_type": "substitution",
            "weight": jac * (1.0 - lift[keep]),
            "directed": False,
            "count": together[keep].astype(np.int64),
            "lift": lift[keep],
            "chi2": None,
            "p_value": None,
            "jaccard": jac,
            "price_gap": gap[keep],
        },
        schema=EDGES_SCHEMA,
    ).sort("src", "dst")


def hierarchy_edges(hierarchy: pl.DataFrame) -> pl.DataFrame:
    """Directed child → parent edges, deduplicated, weights by level."""
    frames = [
        hierarchy.select(pl.col(child).alias("src"), pl.col(parent).alias("dst"))
        .unique()
        .with_columns(weight=pl.lit(w))
        for (child, parent), w in zip(pairwise(HIERARCHY_LEVELS), HIERARCHY_WEIGHTS, strict=True)
    ]
    return (
        pl.concat(frames)
        .sort("weight", "src", "dst", descending=[True, False, False])
        .select(
            "src",
            "dst",
            pl.lit("hierarchy").alias("edge_type"),
            "weight",
            pl.lit(True).alias("directed"),
            *[
                pl.lit(None).cast(EDGES_SCHEMA[c]).alias(c)
                for c in ("count", "lift", "chi2", "p_value", "jaccard", "price_gap")
            ],
        )
        .cast(dict(EDGES_SCHEMA))
    )


def node_table(
    products: pl.DataFrame, hierarchy: pl.DataFrame, support: np.ndarray, cfg: GraphConfig
) -> pl.DataFrame:
    """Product nodes (tier from the price percentile within the sub-commodity) and category
    nodes.
    """
    pct = pl.col("mean_price").rank("average").over("prod_code_10") / pl.len().over("prod_code_10")
    tier = (
        pl.when(pl.col("mean_price").is_null())
        .then(None)
        .when(pct <= cfg.value_tier_quantile)
        .then(pl.lit("value"))
        .when(pct > cfg.premium_tier_quantile)
        .then(pl.lit("premium"))
        .otherwise(pl.lit("mid"))
    )
    path = pl.concat_str([pl.col(c) for c in reversed(HIERARCHY_LEVELS[1:])], separator="/")
    prod = products.join(hierarchy, on=["product_id", "prod_code_10"], how="left").with_columns(
        n_baskets=pl.Series(support.astype(np.int64))
    )
    product_nodes = prod.select(
        pl.col("product_id").alias("node_id"),
        pl.lit("product").alias("node_type"),
        pl.lit(0, pl.Int8).alias("hierarchy_level"),
        tier.alias("price_tier"),
        path.alias("category_path"),
        "mean_price",
        "n_baskets",
    )
    categories = []
    for level, col in enumerate(HIERARCHY_LEVELS[1:], start=1):
        cat_path = pl.concat_str(
            [pl.col(c) for c in reversed(HIERARCHY_LEVELS[level:])], separator="/"
        )
        categories.append(
            hierarchy.select(pl.col(col).alias("node_id"), cat_path.alias("category_path"))
            .unique()
            .with_columns(node_type=pl.lit("category"), hierarchy_level=pl.lit(level, pl.Int8))
        )
    cats = (
        pl.concat(categories)
        .sort("hierarchy_level", "node_id")
        .select(
            "node_id",
            "node_type",
            "hierarchy_level",
            pl.lit(None, pl.String).alias("price_tier"),
            "category_path",
            pl.lit(None, pl.Float64).alias("mean_price"),
            pl.lit(None, pl.Int64).alias("n_baskets"),
        )
    )
    return pl.concat([product_nodes.cast(dict(NODES_SCHEMA)), cats.cast(dict(NODES_SCHEMA))])
