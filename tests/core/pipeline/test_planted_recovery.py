"""The pipeline recovers what the generator planted (default preset, spec thresholds)."""

import polars as pl

from retailsim_core.tables import AFFINITY_TABLE, PRICES_TABLE


def test_promotion_detection_f1(default_pipeline):
    wh, truth = default_pipeline["warehouse"], default_pipeline["truth"]
    cells = (
        wh.scan(PRICES_TABLE)
        .filter(pl.col("imputation_method") == "observed")
        .select(
            "product_id",
            pl.col("store_region").cast(pl.String),
            "week",
            "promo_flag",
            "base_discount_depth",
        )
        .collect()
    )
    planted = pl.read_parquet(truth / "promotions.parquet").select(
        "product_id", "store_region", pl.col("week").cast(pl.Int16), "depth"
    )
    j = cells.join(planted, on=["product_id", "store_region", "week"], how="left")
    actual = j["depth"].fill_null(0.0) >= 0.10

    def f1(pred):
        tp, fp, fn = (pred & actual).sum(), (pred & ~actual).sum(), (~pred & actual).sum()
        return 2 * tp / (2 * tp + fp + fn)

    ours, spec = f1(j["promo_flag"]), f1(j["base_discount_depth"] > 0.05)
    print(f"promotion F1: reference price {ours:.3f}, spec 4-week base {spec:.3f}")
    assert ours >= 0.9 and ours > spec


def _recovered(graph, pairs: pl.DataFrame, edge_type: str) -> float:
    e = graph.edges.filter(pl.col("edge_type") == edge_type).select("src", "dst")
    both = pl.concat([e, e.select(pl.col("dst").alias("src"), pl.col("src").alias("dst"))])
    return (
        pairs.join(
            both, left_on=["product_a", "product_b"], right_on=["src", "dst"], how="semi"
        ).height
        / pairs.height
    )


def test_planted_pairs_become_edges_of_the_right_type(default_pipeline):
    graph, truth = default_pipeline["graph"], default_pipeline["truth"]
    complements = pl.read_parquet(truth / "complement_pairs.parquet")
    substitutes = pl.read_parquet(truth / "substitute_pairs.parquet")
    c, s = (
        _recovered(graph, complements, "copurchase"),
        _recovered(graph, substitutes, "substitution"),
    )
    # Precision of substitution edges: how many join a planted pair.
    subs = graph.edges.filter(pl.col("edge_type") == "substitution")
    planted = pl.concat(
        [
            substitutes,
            substitutes.select(
                pl.col("product_b").alias("product_a"), pl.col("product_a").alias("product_b")
            ),
        ]
    )
    precision = subs.join(
        planted, left_on=["src", "dst"], right_on=["product_a", "product_b"], how="semi"
    ).height / max(subs.height, 1)
    print(
        f"complements recovered {c:.2%}, substitutes recovered {s:.2%} (precision {precision:.2%})"
    )
    assert c >= 0.8 and s >= 0.8 and precision >= 0.8


def test_primary_store_is_the_planted_home(default_pipeline):
    wh, truth = default_pipeline["warehouse"], default_pipeline["truth"]
    snap = wh.scan(AFFINITY_TABLE, [117]).filter(pl.col("n_visits") >= 5).collect()
    home = pl.read_parquet(truth / "customers.parquet").select(
        pl.col("code").alias("customer_id"), "home_store_id"
    )
    j = snap.join(home, on="customer_id")
    share = (j["primary_store"] == j["home_store_id"]).mean()
    print(f"primary store = planted home for {share:.2%} of {j.height} customers")
    assert j.height > 1000 and share >= 0.95
