"""Product graph statistics (design §2.3) on hand-made baskets."""

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp
from scipy.stats import chi2_contingency

from retailsim_core.graph.graph_edges import (
    GraphConfig,
    copurchase_edges,
    copurchase_stats,
    hierarchy_edges,
    incidence,
    lift_and_chi2,
    substitution_edges,
)


def test_lift_and_chi_square_match_the_textbook():
    n, sup_a, sup_b, both = 1000, 120, 80, 40
    lift, stat, p = lift_and_chi2(np.array([both]), np.array([sup_a]), np.array([sup_b]), n)
    assert lift[0] == pytest.approx(both * n / (sup_a * sup_b))
    table = [[both, sup_a - both], [sup_b - both, n - sup_a - sup_b + both]]
    expected_stat, expected_p, _, _ = chi2_contingency(table, correction=False)
    assert stat[0] == pytest.approx(expected_stat) and p[0] == pytest.approx(expected_p)


def test_copurchase_counts_from_incidence():
    # baskets: {0,1}, {0,1}, {0,2}, {1}, {0,1,2}
    b = pl.Series([0, 0, 1, 1, 2, 2, 3, 4, 4, 4, 0])  # a duplicate line of (0, 0) counts once
    p = pl.Series([0, 1, 0, 1, 0, 2, 1, 0, 1, 2, 0])
    counts, support, n = copurchase_stats(incidence(b, p, 5, 3))
    dense = counts.toarray()
    assert n == 5 and support.tolist() == [4, 4, 2]
    assert dense[0, 1] == 3 and dense[0, 2] == 2 and dense[1, 2] == 1 and dense[1, 0] == 0


def test_copurchase_thresholds_and_top_k():
    products = pl.Series([f"P{i}" for i in range(4)])
    counts = sp.coo_matrix(
        (np.array([60, 60, 60, 10]), (np.array([0, 0, 0, 2]), np.array([1, 2, 3, 3]))), shape=(4, 4)
    )
    support = np.array([100, 100, 150, 100])
    edges = copurchase_edges(products, counts, support, 1000, GraphConfig(top_k=1))
    # lifts: (0,1) 6.0, (0,2) 4.0, (0,3) 6.0, (2,3) count 10 <= 50 -> dropped.
    # Top-1: P0 keeps one of its 6.0 pairs; P1, P3 each keep theirs; (0,2) is P2's best -> kept.
    got = set(zip(edges["src"], edges["dst"], strict=True))
    assert got == {("P0", "P1"), ("P0", "P2"), ("P0", "P3")}
    assert edges.filter(pl.col("src") == "P0", pl.col("dst") == "P2")["weight"][0] == pytest.approx(
        4.0
    )


def test_substitution_needs_overlap_exclusivity_same_category_and_similar_price():
    products = pl.DataFrame(
        {
            "product_id": ["A", "B", "C", "D"],
            "prod_code_10": ["CL1", "CL1", "CL1", "CL2"],
            "mean_price": [2.0, 2.2, 5.0, 2.1],
        }
    )
    # customers x products: A and B share 4 of 5 customers; C shares them too but costs 2.5x;
    # D shares them but sits in another sub-commodity.
    cust = np.array(
        [[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 0, 1, 1], [0, 0, 0, 0]]
    )
    customers = sp.csc_matrix(cust.astype(np.float32))
    counts = sp.coo_matrix(
        (np.array([1]), (np.array([0]), np.array([1]))), shape=(4, 4)
    )  # A,B once together
    edges = substitution_edges(
        products, customers, counts, np.array([50, 50, 50, 50]), 1000, GraphConfig()
    )
    assert edges.select("src", "dst").rows() == [("A", "B")]
    row = edges.row(0, named=True)
    assert row["jaccard"] == pytest.approx(4 / 5)
    lift = 1 * 1000 / (50 * 50)
    assert row["lift"] == pytest.approx(lift) and row["weight"] == pytest.approx(0.8 * (1 - lift))
    assert row["price_gap"] == pytest.approx(0.2 / 2.1)


def test_hierarchy_edges_and_weights():
    h = pl.DataFrame(
        {
            "product_id": ["P1", "P2"],
            "prod_code_10": ["CL1", "CL1"],
            "prod_code_20": ["DEP1", "DEP1"],
            "prod_code_30": ["G1", "G1"],
            "prod_code_40": ["D1", "D1"],
        }
    )
    e = hierarchy_edges(h)
    assert e.select("src", "dst", "weight").rows() == [
        ("P1", "CL1", 1.0),
        ("P2", "CL1", 1.0),
        ("CL1", "DEP1", 0.5),
        ("DEP1", "G1", 0.25),
        ("G1", "D1", 0.125),
    ]
    assert e["directed"].all()
