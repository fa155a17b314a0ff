"""Substitutes found in the data, and the held-out promotion test that checks them.

The spec's rule (customer Jaccard > 0.6, lift < 1.2) never fires on real LGSR: two products of a
sub-commodity rarely share 60% of their buyers. What real substitutes do show is *switching*:

- the same customers buy both, more often than the products' buyer counts predict
  (shared buyers ~ Poisson(buyers_a * buyers_b / buyers of the sub-commodity), upper tail), and
- those customers rarely buy them in the same basket: on the sub-commodity trips of the shared
  buyers, the count of baskets holding both is far below
  ``baskets_with_a * baskets_with_b / sub-commodity baskets`` (Poisson, lower tail).

A pair is an edge when both tests reject at a false-discovery rate (Benjamini-Hochberg over every
candidate pair of every sub-commodity): the threshold comes from the data, not a fixed constant.

:func:`promotion_holdout` validates the edges on weeks the graph never saw: when A is on promotion
in a store-week, B's units there should fall against B's own baseline in that store, more than for
random pairs of the same sub-commodity.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import scipy.sparse as sp
from scipy.stats import poisson

from retailsim_core.graph.graph_edges import EDGES_SCHEMA, incidence

# Cells of derived_prices the promotion tests read (``pipeline.price_weeks.promotion_cells``).
PROMOTION_CELLS_SCHEMA = pl.Schema(
    {
        "product_id": pl.String,
        "store_id": pl.String,
        "week": pl.Int16,
        "promo": pl.Boolean,
        "observed": pl.Boolean,
        "units": pl.Int64,
        "discount_depth": pl.Float64,
    }
)


def log_rate_ratio(units: str, weeks: str, base_units: str, base_weeks: str) -> pl.Expr:
    """log((units / weeks + 1) / (base_units / base_weeks + 1)): the change of mean units per
    store-week, +1 smoothed (a few units per product and store-week are common)."""
    return (
        (pl.col(units) / pl.col(weeks) + 1) / (pl.col(base_units) / pl.col(base_weeks) + 1)
    ).log()


def weighted_mean(value: str, weight: str) -> pl.Expr:
    return (pl.col(value) * pl.col(weight)).sum() / pl.col(weight).sum()


def bh_threshold(p: np.ndarray, rate: float) -> float:
    """The Benjamini-Hochberg cut: the largest p_(k) <= rate * k / m (-1 when none passes)."""
    ranked = np.sort(p)
    passing = ranked[ranked <= rate * np.arange(1, len(ranked) + 1) / max(len(ranked), 1)]
    return float(passing.max()) if len(passing) else -1.0


def _block_pairs(
    idx: np.ndarray, counts: sp.csc_matrix, baskets: sp.csc_matrix, owner: sp.csr_matrix
) -> pl.DataFrame:
    """Switching statistics of every pair of one sub-commodity's products ``idx``."""
    held = counts[:, idx]  # (C, k) baskets
    bought = (held > 0).astype(np.float64)  # (C, k)
    lines = baskets[:, idx]  # (Bk, k)
    in_block = (np.asarray(lines.sum(axis=1)).ravel() > 0).astype(np.float64)
    trips = owner @ in_block  # (C,) sub-com. trips
    buyers = np.asarray(bought.sum(axis=0)).ravel()
    shared = (bought.T @ bought).toarray()  # (k, k)
    with_a = (held.T @ bought).toarray()  # [a, b]: baskets with a of b's buyers
    pool = (bought.T @ bought.multiply(trips[:, None])).toarray()
    together = (lines.T @ lines).toarray()
    a, b = np.triu_indices(len(idx), k=1)
    expected_together = with_a[a, b] * with_a[b, a] / np.maximum(pool[a, b], 1.0)
    expected_shared = buyers[a] * buyers[b] / max(int((trips > 0).sum()), 1)
    return pl.DataFrame(
        {
            "i": idx[a].astype(np.int64),
            "j": idx[b].astype(np.int64),
            "shared": shared[a, b],
            "together": together[a, b],
            "expected_together": expected_together,
            "p_exclusive": poisson.cdf(together[a, b], expected_together),
            "p_shared": poisson.sf(shared[a, b] - 1, expected_shared),
            "jaccard": shared[a, b] / np.maximum(buyers[a] + buyers[b] - shared[a, b], 1.0),
        }
    )


def switching_edges(products: pl.DataFrame, carded: pl.DataFrame, rate: float) -> pl.DataFrame:
    """Substitution edges (EDGES_SCHEMA) by the switching tests at false-discovery ``rate``.
    ``products``: idx-ordered (product_id, prod_code_10, mean_price); ``carded``: distinct
    (b, c, p) lines of carded baskets (dense basket, customer and product indices)."""
    if carded.is_empty():
        return EDGES_SCHEMA.to_frame()
    n_b, n_c, n_p = int(carded["b"].max()) + 1, int(carded["c"].max()) + 1, products.height
    baskets = incidence(carded["b"], carded["p"], n_b, n_p)
    owners = carded.select("b", "c").unique()
    owner = incidence(owners["c"], owners["b"], n_c, n_b)  # (C, B)
    counts, baskets = (owner @ baskets).tocsc(), baskets.tocsc()
    frames = [
        _block_pairs(block["idx"].to_numpy(), counts, baskets, owner)
        for _, block in products.with_row_index("idx").group_by("prod_code_10", maintain_order=True)
        if block.height >= 2
    ]
    if not frames:
        return EDGES_SCHEMA.to_frame()
    cand = pl.concat(frames).with_columns(p_value=pl.max_horizontal("p_exclusive", "p_shared"))
    cut = bh_threshold(cand["p_value"].to_numpy(), rate)
    kept = cand.filter(pl.col("p_value") <= cut)
    price = products["mean_price"].to_numpy()
    i, j = kept["i"].to_numpy(), kept["j"].to_numpy()
    ratio = kept["together"].to_numpy() / np.maximum(kept["expected_together"].to_numpy(), 1e-12)
    names = products["product_id"].to_numpy()
    return pl.DataFrame(
        {
            "src": names[i],
            "dst": names[j],
            "edge_type": "substitution",
            "weight": np.clip(1.0 - ratio, 0.0, 1.0),
            "directed": False,
            "count": kept["together"].to_numpy().astype(np.int64),
            "lift": ratio,
            "chi2": None,
            "p_value": kept["p_value"],
            "jaccard": kept["jaccard"],
            "price_gap": np.abs(price[i] - price[j]) / ((price[i] + price[j]) / 2),
        },
        schema=EDGES_SCHEMA,
    ).sort("src", "dst")


def pair_effects(cells: pl.LazyFrame, pairs: pl.DataFrame) -> pl.DataFrame:
    """Per directed pair (a, b): the store-weeks where a sold on promotion and b was not on
    promotion, and the mean over them of log((b's units + 1) / (b's baseline + 1)), b's baseline
    being its mean units in that store over the weeks when neither was on promotion."""
    promoted = cells.filter(pl.col("observed") & pl.col("promo")).select(
        pl.col("product_id").alias("a"), "store_id", "week"
    )
    hits = pairs.lazy().join(promoted, on="a")  # (a, b, store, week): a on promotion
    # Only the (b, store) pairs some promotion of a partner reaches: the same sums over a
    # small share of the cells (the real sample: 29M cells, 7.5 GB for the joins before).
    b_cells = (
        cells.filter(~pl.col("promo"))
        .select(pl.col("product_id").alias("b"), "store_id", "week", "units")
        .join(hits.select("b", "store_id").unique(), on=["b", "store_id"], how="semi")
    )
    baseline = b_cells.group_by("b", "store_id").agg(
        pl.col("units").sum().alias("total"), pl.len().alias("weeks")
    )
    per_store = (
        hits.join(b_cells, on=["b", "store_id", "week"])
        .group_by("a", "b", "store_id")
        .agg(pl.col("units").sum().alias("promo_units"), pl.len().alias("promo_weeks"))
        .join(baseline, on=["b", "store_id"])
        .with_columns(
            base_weeks=pl.col("weeks") - pl.col("promo_weeks"),
            base_units=pl.col("total") - pl.col("promo_units"),
        )
        .filter(pl.col("base_weeks") > 0)
        .with_columns(
            effect=log_rate_ratio("promo_units", "promo_weeks", "base_units", "base_weeks")
        )
        .sort("a", "b", "store_id")  # a pair's stores add up in a fixed order: same bytes
    )
    return (
        per_store.group_by("a", "b", maintain_order=True)
        .agg(
            weighted_mean("effect", "promo_weeks").alias("effect"),
            pl.col("promo_weeks").sum().alias("store_weeks"),
        )
        .sort("a", "b")
        .collect()
    )


def _bootstrap_means(x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    return x[rng.integers(0, len(x), (n, len(x)))].mean(axis=1)


def holdout_pairs(
    edges: pl.DataFrame, products: pl.DataFrame, *, seed: int = 0, random_per_edge: int = 2
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(a, b) pairs the hold-out compares: the substitution edges both ways, and a seeded sample
    of ``random_per_edge`` pairs per directed edge from the same sub-commodity (not edges)."""
    subs = edges.filter(pl.col("edge_type") == "substitution").select(
        pl.col("src").alias("a"), pl.col("dst").alias("b")
    )
    directed = pl.concat(
        [subs, subs.select(pl.col("b").alias("a"), pl.col("a").alias("b"))]
    ).unique()
    same = (
        products.select(pl.col("product_id").alias("a"), "prod_code_10")
        .join(products.select(pl.col("product_id").alias("b"), "prod_code_10"), on="prod_code_10")
        .filter(pl.col("a") != pl.col("b"))
        .select("a", "b")
        .sort("a", "b")
        .join(directed, on=["a", "b"], how="anti")
    )
    return directed, same.sample(min(same.height, random_per_edge * directed.height), seed=seed)


def promotion_holdout(
    cells: pl.LazyFrame,
    edges: pl.DataFrame,
    products: pl.DataFrame,
    *,
    seed: int = 0,
    random_per_edge: int = 2,
    bootstrap: int = 1000,
) -> dict:
    """The held-out promotion test of the substitution edges: mean pair effect of substitutes
    against random pairs of the same sub-commodity (not edges, :func:`holdout_pairs`), the
    difference with a 95% bootstrap interval over pairs. ``cells``: PROMOTION_CELLS_SCHEMA rows
    of weeks the graph never saw (those of the pairs' products suffice); ``products``:
    product_id, prod_code_10."""
    directed, randoms = holdout_pairs(edges, products, seed=seed, random_per_edge=random_per_edge)
    out: dict = {"substitution_edges": int((edges["edge_type"] == "substitution").sum())}
    if directed.is_empty():
        return out | {"note": "no substitution edge to test"}
    sub_fx, rand_fx = pair_effects(cells, directed), pair_effects(cells, randoms)
    out |= {
        "substitute_pairs_measured": sub_fx.height,
        "random_pairs_measured": rand_fx.height,
        "substitute_store_weeks": int(sub_fx["store_weeks"].sum()),
    }
    if sub_fx.is_empty() or rand_fx.is_empty():
        return out | {"note": "no held-out promotion of a paired product"}
    s, r = sub_fx["effect"].to_numpy(), rand_fx["effect"].to_numpy()
    rng = np.random.default_rng(seed)
    diff = _bootstrap_means(s, bootstrap, rng) - _bootstrap_means(r, bootstrap, rng)
    lo, hi = np.quantile(diff, [0.025, 0.975])
    return out | {
        "substitute_effect": float(s.mean()),
        "random_effect": float(r.mean()),
        "difference": float(s.mean() - r.mean()),
        "difference_ci": [float(lo), float(hi)],
        "substitute_negative_share": float((s < 0).mean()),
        "random_negative_share": float((r < 0).mean()),
        "confirmed": bool(hi < 0),
    }


def planted_recovery(edges: pl.DataFrame, planted: pl.DataFrame) -> dict:
    """Share of the generator's planted substitute pairs (product_a, product_b) that are
    substitution edges (either direction), and the share of edges that are planted pairs."""
    subs = (
        edges.filter(pl.col("edge_type") == "substitution")
        .select(
            pl.min_horizontal("src", "dst").alias("a"), pl.max_horizontal("src", "dst").alias("b")
        )
        .unique()
    )
    pairs = planted.select(
        pl.min_horizontal("product_a", "product_b").alias("a"),
        pl.max_horizontal("product_a", "product_b").alias("b"),
    ).unique()
    hits = subs.join(pairs, on=["a", "b"], how="semi").height
    return {
        "planted_pairs": pairs.height,
        "planted_recall": hits / max(pairs.height, 1),
        "planted_precision": hits / max(subs.height, 1),
    }
