"""Partition agreement (ARI, NMI) against hand-computed values, and the brand check's table."""

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retailsim_core.features.brand_agreement import brand_agreement, partition_agreement


def _agree(a, b):
    return partition_agreement(pl.DataFrame({"a": a, "b": b}), "a", "b")


def test_known_values():
    assert _agree([0, 0, 1, 1], [5, 5, 7, 7]) == {"ari": 1.0, "nmi": 1.0}  # names do not matter
    crossed = _agree([0, 0, 1, 1], [0, 1, 0, 1])
    assert crossed["ari"] == pytest.approx(-0.5) and crossed["nmi"] == pytest.approx(0.0)
    split = _agree([0, 0, 1, 1], [0, 0, 1, 2])  # by hand: (1 - 1/3) / (3/2 - 1/3)
    assert split["ari"] == pytest.approx(4 / 7) and split["nmi"] == pytest.approx(0.8)


@settings(max_examples=50, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=2, max_size=40))
def test_agreement_is_symmetric_and_bounded(pairs):
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    one, other = _agree(a, b), _agree(b, a)
    assert one["ari"] == pytest.approx(other["ari"]) and one["nmi"] == pytest.approx(other["nmi"])
    assert one["ari"] <= 1.0 + 1e-12 and 0.0 <= one["nmi"] <= 1.0


def test_brand_agreement_reads_tiers_and_private_labels():
    pseudo = pl.DataFrame(
        {
            "product_id": ["P1", "P2", "P3", "P4", "P5"],
            "prod_code_10": ["SOUP"] * 3 + ["TEA"] * 2,
            "pseudo_brand_id": [1, 1, 2, 3, 3],
            "price_tier": ["premium", "premium", "budget", "budget", "budget"],
        }
    )
    products = pl.DataFrame(
        {
            "product_id": ["P1", "P2", "P3", "P4", "P5", "P9"],
            "manufacturer_id": [10, 10, 69, 69, 69, 70],
            "brand": ["National", "National", "Private", "Private", "Private", "National"],
        }
    )
    out = brand_agreement(pseudo, products)
    assert out["products"] == 5 and out["manufacturers"] == 2 and out["pseudo_brand_ids"] == 3
    assert out["private_share_by_tier"] == {
        "budget": {"products": 3, "private": 1.0},
        "premium": {"products": 2, "private": 0.0},
    }
    assert out["private_share"] == 0.6
    assert 0 < out["pseudo_brand_vs_manufacturer"]["nmi"] <= 1
