"""Pseudo-brands, price features and store features on hand-made frames."""

import subprocess
import sys

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from retailsim_core.features.brands import product_price_stats, pseudo_brands
from retailsim_core.features.feature_tables import (
    PRICE_STATE_SCHEMA,
    StoreState,
    advance_stores,
    next_price_state,
    price_features,
    store_features,
)
from retailsim_core.graph.graph_edges import EDGES_SCHEMA


def _brands():
    products = pl.DataFrame(
        {
            "product_id": [f"PRD{i:07d}" for i in range(12)],
            "prod_code_10": ["CL00001"] * 10 + ["CL00002"] * 2,
        }
    )
    stats = pl.DataFrame(
        {
            "product_id": products["product_id"],
            "mean_price": [float(p) for p in range(1, 13)],
            "median_price": [float(p) for p in range(1, 13)],
            "price_stability": [0.1] * 12,
        }
    )
    units = pl.DataFrame({"product_id": products["product_id"], "units": [10] * 10 + [30, 10]})
    edges = pl.DataFrame(
        {
            "src": ["PRD0000003", "PRD0000004"],
            "dst": ["PRD0000004", "PRD0000005"],
            "edge_type": ["substitution", "substitution"],
            "weight": [0.7, 0.2],
        },
        schema_overrides={"weight": pl.Float64},
    ).with_columns(
        [
            pl.lit(None).cast(t).alias(c)
            for c, t in EDGES_SCHEMA.items()
            if c not in ("src", "dst", "edge_type", "weight")
        ]
    )
    return pseudo_brands(products, stats, units, edges.select(EDGES_SCHEMA.names()))


def test_price_stats_by_hand():
    # A: week 1 stores at 1 and 3 (weekly mean 2), week 2 at 4 -> weekly means 2, 4; B: one week.
    rows = pl.DataFrame(
        {
            "product_id": ["A", "B", "A", "A"],
            "week": [2, 1, 1, 1],
            "actual_price": [4.0, 5.0, 3.0, 1.0],
        }
    )
    got = product_price_stats(rows.lazy()).sort("product_id").collect()
    cv_a = (2.0**0.5) / 3.0  # std(2, 4) = sqrt(2), mean 3
    want = pl.DataFrame(
        {
            "product_id": ["A", "B"],
            "mean_price": [8.0 / 3.0, 5.0],
            "median_price": [3.0, 5.0],
            "price_stability": [cv_a, 0.0],
        }
    )
    assert_frame_equal(got, want)


def test_price_stats_are_the_same_bytes_for_any_row_order():
    """Float sums depend on their order; the statistics must not depend on the rows' (D47)."""
    import numpy as np

    rng = np.random.default_rng(0)
    n = 3000
    rows = pl.DataFrame(
        {
            "product_id": rng.choice(["A", "B", "C"], n),
            "week": rng.integers(1, 30, n),
            "actual_price": rng.lognormal(0.0, 1.5, n),
        }
    )
    runs = [
        product_price_stats(rows.sample(fraction=1.0, shuffle=True, seed=s).lazy())
        .sort("product_id")
        .collect()
        for s in range(5)
    ]
    for other in runs[1:]:
        assert_frame_equal(other, runs[0], check_exact=True)


def test_tiers_split_a_category_20_60_20():
    b = _brands().filter(pl.col("prod_code_10") == "CL00001").sort("mean_price")
    assert b["price_tier"].to_list() == ["value"] * 2 + ["mid"] * 6 + ["premium"] * 2
    assert b["category_positioning"].to_list() == pytest.approx([i / 10 for i in range(10)])


def test_clusters_competition_and_share():
    b = _brands()

    def row(p):
        return b.filter(pl.col("product_id") == p).row(0, named=True)

    # 3-4 is a strong edge (0.7 > 0.5): one cluster labelled by its smallest id; 4-5 is weak.
    assert (
        row("PRD0000003")["substitution_group"]
        == row("PRD0000004")["substitution_group"]
        == "PRD0000003"
    )
    assert row("PRD0000005")["substitution_group"] is None
    assert (
        row("PRD0000004")["competitive_intensity"] == 2
        and row("PRD0000000")["competitive_intensity"] == 0
    )
    assert row("PRD0000010")["market_share_proxy"] == pytest.approx(0.75)
    # Isolated mid-tier products share one brand; the substitution cluster is its own brand.
    assert row("PRD0000002")["pseudo_brand_id"] == row("PRD0000005")["pseudo_brand_id"]
    assert row("PRD0000003")["pseudo_brand_id"] != row("PRD0000002")["pseudo_brand_id"]
    assert sorted(b["pseudo_brand_id"].unique().to_list()) == list(
        range(b["pseudo_brand_id"].n_unique())
    )


def test_pseudo_brand_ids_are_identical_in_another_process():
    code = (
        "from tests.core.features.test_feature_tables import _brands; import sys; "
        "sys.stdout.write(','.join(map(str, _brands()['pseudo_brand_id'].to_list())))"
    )
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert other == ",".join(map(str, _brands()["pseudo_brand_id"].to_list()))


def _prices(week, rows):
    return pl.DataFrame(
        [
            {
                "product_id": p,
                "store_id": s,
                "week": week,
                "shop_week": 200600 + week,
                "actual_price": price,
                "discount_depth": d,
                "promo_flag": d > 0.05,
            }
            for p, s, price, d in rows
        ],
        schema_overrides={"week": pl.Int16, "shop_week": pl.Int32},
    )


CATS = pl.DataFrame({"product_id": ["A", "B"], "prod_code_10": ["CL1", "CL1"]})


def test_price_features_first_week_promotions_and_relative_price():
    import math

    w1 = price_features(
        _prices(1, [("A", "S1", 2.0, 0.0), ("B", "S1", 4.0, 0.0)]),
        CATS,
        PRICE_STATE_SCHEMA.to_frame(),
    )
    a1 = w1.row(0, named=True)
    assert (
        not a1["has_prior_price"]
        and a1["price_velocity"] == 0.0
        and a1["price_acceleration"] == 0.0
    )
    assert a1["relative_price"] == pytest.approx(2.0 / 3.0) and a1["log_price"] == pytest.approx(
        math.log(2.0)
    )
    w2 = price_features(
        _prices(2, [("A", "S1", 1.5, 0.25), ("B", "S1", 4.0, 0.0)]), CATS, next_price_state(w1)
    )
    w3 = price_features(
        _prices(3, [("A", "S1", 1.5, 0.25), ("B", "S1", 4.0, 0.0)]), CATS, next_price_state(w2)
    )
    w4 = price_features(
        _prices(4, [("A", "S1", 2.0, 0.0), ("B", "S1", 4.0, 0.0)]), CATS, next_price_state(w3)
    )
    a = [f.row(0, named=True) for f in (w2, w3, w4)]
    assert [r["promo_momentum"] for r in a] == [1, 2, 0]
    assert a[0]["price_velocity"] == pytest.approx(math.log(1.5 / 2.0))
    assert a[1]["price_velocity"] == 0.0 and a[1]["price_acceleration"] == pytest.approx(
        -math.log(1.5 / 2.0)
    )
    assert a[2]["price_velocity"] == pytest.approx(math.log(2.0 / 1.5)) and a[2]["has_prior_price"]


def _raw(week, rows):
    return pl.DataFrame(
        [
            {"store_id": s, "store_format": f, "store_region": r, "basket_id": b, "product_id": p}
            for s, f, r, b, p in rows
        ],
        schema_overrides={"basket_id": pl.Int64},
    )


def test_store_features_as_of_and_new_store_fallback():
    state = StoreState.empty()
    w1 = _raw(
        1,
        [
            ("S1", "LS", "E01", 1, "A"),
            ("S1", "LS", "E01", 1, "B"),
            ("S1", "LS", "E01", 2, "A"),
            ("S2", "LS", "E01", 3, "A"),
        ],
    )
    state = advance_stores(state, w1, 1)
    state = advance_stores(
        state, _raw(2, [("S1", "LS", "E01", 4, "C"), ("S4", "SS", "W03", 5, "A")]), 2
    )
    f = store_features(state, 3)

    def get(**kw):
        return f.filter(
            *[pl.col(k).eq(v) if v is not None else pl.col(k).is_null() for k, v in kw.items()]
        ).row(0, named=True)

    s1, s2 = get(store_id="S1"), get(store_id="S2")
    assert s1["traffic_baskets_per_week"] == pytest.approx(3 / 2) and s1["distinct_products"] == 3
    assert s1["traffic"] == 1.0 and s2["traffic"] == pytest.approx(0.5 / 1.5)
    assert s1["age_weeks"] == 2 and s1["stores_in_region"] == 2 and not s1["is_new_store"]
    # Fallback rows: LS/E01 from S1 and S2; LS/N01 from all LS stores; MS/* from all stores.
    assert get(store_id=None, store_format="LS", store_region="E01")[
        "traffic_baskets_per_week"
    ] == pytest.approx(1.0)
    assert get(store_id=None, store_format="LS", store_region="N01")[
        "traffic_baskets_per_week"
    ] == pytest.approx(1.0)
    assert get(store_id=None, store_format="MS", store_region="E01")[
        "traffic_baskets_per_week"
    ] == pytest.approx((1.5 + 0.5 + 1.0) / 3)
    assert f.filter(pl.col("store_id").is_null()).height == 48
    assert (
        f.select(
            pl.col("traffic", "size_proxy", "regional_competition", "age").is_between(0, 1).all()
        ).row(0)
        == (True,) * 4
    )


def test_zero_prices_are_imputed_from_the_category_and_flagged():
    import math

    rows = [("A", "S1", 0.0, 0.0), ("B", "S1", 3.0, 0.0)]
    f = price_features(_prices(1, rows), CATS, PRICE_STATE_SCHEMA.to_frame())
    a = f.filter(pl.col("product_id") == "A").row(0, named=True)
    assert a["is_imputed_price"] and a["actual_price"] == 3.0 and math.isfinite(a["log_price"])
    assert not f.filter(pl.col("product_id") == "B")["is_imputed_price"][0]
