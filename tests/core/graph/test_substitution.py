"""Substitutes from the data (switching tests) and the held-out promotion test, on literal data."""

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from scipy.stats import poisson

from retailsim_core.graph.graph_edges import EDGES_SCHEMA
from retailsim_core.graph.substitution import (
    PROMOTION_CELLS_SCHEMA,
    bh_threshold,
    pair_effects,
    planted_recovery,
    promotion_holdout,
    switching_edges,
)

PRODUCTS = pl.DataFrame(
    {
        "product_id": ["A", "B", "C", "D", "E"],
        "prod_code_10": ["CL1", "CL1", "CL1", "CL1", "CL2"],
        "mean_price": [1.0, 1.1, 2.0, 2.2, 5.0],
    }
)


def _lines():
    """Customers 0-29 switch between A and B (one of them per trip, never both); customers 30-59
    buy C and D together on every trip; everyone buys E now and then."""
    b, c, p = [], [], []
    basket = 0
    for cust in range(60):
        for trip in range(10):
            items = ([0] if trip % 2 else [1]) if cust < 30 else [2, 3]
            items = items + ([4] if trip % 3 == 0 else [])
            for item in items:
                b.append(basket), c.append(cust), p.append(item)
            basket += 1
    return pl.DataFrame(
        {"b": b, "c": c, "p": p}, schema={"b": pl.Int64, "c": pl.Int64, "p": pl.Int64}
    )


def test_switching_products_are_substitutes_and_products_bought_together_are_not():
    edges = switching_edges(PRODUCTS, _lines(), rate=0.05)
    assert edges.schema == EDGES_SCHEMA
    assert edges.select("src", "dst").rows() == [("A", "B")]
    row = edges.row(0, named=True)
    assert (
        row["count"] == 0 and row["lift"] == 0.0 and row["weight"] == 1.0 and row["jaccard"] == 1.0
    )
    # shared buyers 30 vs 30 * 30 / 60 expected; together 0 vs 150 * 150 / 300 expected
    assert row["p_value"] == pytest.approx(max(poisson.sf(29, 15.0), poisson.cdf(0, 75.0)))
    assert row["price_gap"] == pytest.approx(0.1 / 1.05)


def test_no_carded_line_means_no_substitute():
    empty = pl.DataFrame(schema={"b": pl.Int64, "c": pl.Int64, "p": pl.Int64})
    assert switching_edges(PRODUCTS, empty, rate=0.05).is_empty()


def test_benjamini_hochberg_cut_matches_hand_computation():
    p = np.array([0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205])
    # rate 0.05, m 8: thresholds 0.00625 k; p_(2) = 0.008 <= 0.0125 is the largest passing one
    assert bh_threshold(p, 0.05) == 0.008
    assert bh_threshold(np.array([0.5, 0.9]), 0.05) == -1.0


def _cells(rows):
    rows = [(*row, 0.3 if row[3] else 0.0) for row in rows]  # + discount_depth
    return pl.DataFrame(rows, schema=list(PROMOTION_CELLS_SCHEMA.items()), orient="row").lazy()


def test_a_pairs_effect_is_the_log_ratio_to_the_weeks_when_neither_was_on_promotion():
    # store S, weeks 1-4: A on promotion (observed) in week 2; B sells 4, 1, 4, 4 (week 4: B itself
    # on promotion, left out of its baseline).
    cells = _cells(
        [
            ("A", "S", 1, False, True, 3),
            ("A", "S", 2, True, True, 9),
            ("A", "S", 3, False, True, 3),
            ("A", "S", 4, False, True, 3),
            ("B", "S", 1, False, True, 4),
            ("B", "S", 2, False, True, 1),
            ("B", "S", 3, False, True, 4),
            ("B", "S", 4, True, True, 12),
        ]
    )
    got = pair_effects(cells, pl.DataFrame({"a": ["A", "B"], "b": ["B", "A"]}))
    want = pl.DataFrame(
        {
            "a": ["A", "B"],
            "b": ["B", "A"],
            "effect": [np.log(2 / 5), np.log(4 / 4)],
            "store_weeks": [1, 1],
        },
        schema_overrides={"store_weeks": pl.UInt32},
    )
    assert_frame_equal(got, want)


def _all_cells_pair_effects(cells: pl.LazyFrame, pairs: pl.DataFrame) -> pl.DataFrame:
    """The reference: every non-promoted cell joined, no pre-filter."""
    b_cells = cells.filter(~pl.col("promo")).select(
        pl.col("product_id").alias("b"), "store_id", "week", "units"
    )
    baseline = b_cells.group_by("b", "store_id").agg(total=pl.col("units").sum(), weeks=pl.len())
    promoted = cells.filter(pl.col("observed") & pl.col("promo")).select(
        pl.col("product_id").alias("a"), "store_id", "week"
    )
    per_store = (
        pairs.lazy()
        .join(promoted, on="a")
        .join(b_cells, on=["b", "store_id", "week"])
        .group_by("a", "b", "store_id")
        .agg(promo_units=pl.col("units").sum(), promo_weeks=pl.len())
        .join(baseline, on=["b", "store_id"])
        .filter(pl.col("weeks") > pl.col("promo_weeks"))
        .with_columns(
            effect=(
                (pl.col("promo_units") / pl.col("promo_weeks") + 1)
                / (
                    (pl.col("total") - pl.col("promo_units"))
                    / (pl.col("weeks") - pl.col("promo_weeks"))
                    + 1
                )
            ).log()
        )
    )
    return (
        per_store.group_by("a", "b")
        .agg(
            effect=(pl.col("effect") * pl.col("promo_weeks")).sum() / pl.col("promo_weeks").sum(),
            store_weeks=pl.col("promo_weeks").sum(),
        )
        .sort("a", "b")
        .collect()
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pair_effects_read_only_the_reached_cells_and_equal_the_reference(seed):
    """Pre-filtering b's cells to the (b, store) pairs a partner's promotion reaches changes no
    effect and no count: random cells over 30 products, 12 stores, 20 weeks."""
    rng = np.random.default_rng(seed)
    n = 30 * 12 * 20
    grid = np.stack(np.unravel_index(np.arange(n), (30, 12, 20)), axis=1)
    keep = rng.random(n) < 0.7  # not every product at every store every week
    promo = rng.random(n) < 0.1
    cells = pl.DataFrame(
        {
            "product_id": [f"P{i}" for i in grid[keep, 0]],
            "store_id": [f"S{i}" for i in grid[keep, 1]],
            "week": grid[keep, 2].astype(np.int32),
            "promo": promo[keep],
            "observed": rng.random(int(keep.sum())) < 0.8,
            "units": rng.poisson(2.0, int(keep.sum())),
            "discount_depth": np.where(promo[keep], 0.3, 0.0),
        }
    ).cast(dict(PROMOTION_CELLS_SCHEMA))
    a, b = rng.integers(0, 30, (2, 60))
    pairs = (
        pl.DataFrame({"a": [f"P{i}" for i in a], "b": [f"P{i}" for i in b]})
        .filter(pl.col("a") != pl.col("b"))
        .unique()
    )
    got = pair_effects(cells.lazy(), pairs)
    want = _all_cells_pair_effects(cells.lazy(), pairs)
    assert got.height > 20
    assert_frame_equal(got, want, check_exact=False, rtol=1e-12)


def test_the_holdout_test_confirms_substitutes_whose_sales_fall_and_not_random_pairs():
    rng = np.random.default_rng(0)
    products = pl.DataFrame(
        {"product_id": [f"P{i:02d}" for i in range(20)], "prod_code_10": ["CL"] * 20}
    )
    edges = pl.DataFrame(
        {
            "src": [f"P{i:02d}" for i in range(0, 10, 2)],
            "dst": [f"P{i:02d}" for i in range(1, 10, 2)],
        }
    ).with_columns(edge_type=pl.lit("substitution"))
    partner = {f"P{i:02d}": f"P{i ^ 1:02d}" for i in range(10)}
    rows = []
    for store in ("S1", "S2"):
        for week in range(1, 41):
            promoted = {f"P{(week + k) % 20:02d}" for k in (0, 7)}
            for i in range(20):
                p = f"P{i:02d}"
                units = 10 + int(rng.integers(0, 3))
                if partner.get(p) in promoted and p not in promoted:
                    units = 4  # its substitute is on offer
                rows.append((p, store, week, p in promoted, True, units))
    result = promotion_holdout(_cells(rows), edges, products, seed=0)
    assert result["substitution_edges"] == 5 and result["substitute_pairs_measured"] == 10
    assert result["substitute_effect"] < -0.5 < result["random_effect"]
    lo, hi = result["difference_ci"]
    assert lo <= result["difference"] <= hi < 0 and result["confirmed"]
    no_subs = promotion_holdout(_cells(rows), edges.clear(), products)
    assert no_subs == {"substitution_edges": 0, "note": "no substitution edge to test"}


def test_planted_recovery_counts_pairs_in_either_direction():
    edges = pl.DataFrame(
        {
            "src": ["B", "C", "X"],
            "dst": ["A", "D", "Y"],
            "edge_type": ["substitution", "substitution", "copurchase"],
        }
    )
    planted = pl.DataFrame({"product_a": ["A", "E"], "product_b": ["B", "F"]})
    assert planted_recovery(edges, planted) == {
        "planted_pairs": 2,
        "planted_recall": 0.5,
        "planted_precision": 0.5,
    }
