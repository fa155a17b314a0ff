"""The shelf of a store-week: the promotion plan's display and mailer flags on the products it
names, a region-less source as one zone, and price multipliers that leave the plan alone."""

import numpy as np
import polars as pl
import pytest
import torch

from retailsim_core.datasets.shelf import (
    PLAN_SCHEMA,
    SHELF_FEATURES,
    ShelfPrices,
    regional_depth,
    with_price_multipliers,
)
from retailsim_core.datasets.tokens import ProductVocab

VOCAB = ProductVocab(("A", "B", "C"))
COL = {name: i for i, name in enumerate(SHELF_FEATURES)}


def _features(week: int) -> pl.DataFrame:
    """Week ``week`` price features of stores S1 and S2, products A, B (C never sold there)."""
    return pl.DataFrame(
        {
            "store_id": ["S1", "S1", "S2", "S2"],
            "week": [week] * 4,
            "product_id": ["A", "B", "A", "B"],
            "relative_price": [1.0, 1.0, 1.0, 1.0],
            "discount_depth": [0.0, 0.0, 0.0, 0.0],
        }
    )


def _observed(region: str | None) -> pl.DataFrame:
    """Week 5: S2 sold A at a 20% cut."""
    return pl.DataFrame(
        {
            "product_id": ["A"],
            "store_id": ["S2"],
            "store_region": [region],
            "week": [5],
            "discount_depth": [0.2],
        },
        schema_overrides={"store_region": pl.String},
    )


def _regions(region: str | None) -> pl.DataFrame:
    return pl.DataFrame(
        {"store_id": ["S1", "S2"], "store_region": [region, region]},
        schema_overrides={"store_region": pl.String},
    )


def test_the_plan_sets_display_and_mailer_on_the_cells_it_names():
    plan = pl.DataFrame(
        [("B", "S1", 5, True, False), ("A", "S2", 5, False, True), ("C", "S1", 5, True, True)],
        schema=PLAN_SCHEMA,
        orient="row",
    )
    shelf = ShelfPrices.build(_features(4), _observed("E01"), _regions("E01"), VOCAB, plan)
    rows = shelf.rows_of(pl.Series(["S1", "S2"]), pl.Series([5, 5]))
    dense = shelf.dense(rows)  # (2, V, S)
    token = dict(VOCAB.frame().iter_rows())
    a, b, c = (token[p] for p in "ABC")
    assert dense[0, b, COL["display"]] == 1 and dense[0, b, COL["mailer"]] == 0
    assert dense[1, a, COL["mailer"]] == 1 and dense[1, a, COL["display"]] == 0
    assert dense[0, a, COL["display"]] == dense[0, a, COL["mailer"]] == 0
    # C is not in S1's assortment: unavailable, and a plan does not put it on the shelf
    assert dense[0, c].sum() == 0
    unplanned = ShelfPrices.build(_features(4), _observed("E01"), _regions("E01"), VOCAB)
    no_plan = unplanned.dense(unplanned.rows_of(pl.Series(["S1"]), pl.Series([5])))
    assert no_plan[..., [COL["display"], COL["mailer"]]].sum() == 0
    np.testing.assert_array_equal(no_plan[..., :4], dense[:1, :, :4])


@pytest.mark.parametrize("region", ["E01", None])
def test_a_promotion_at_another_store_of_the_zone_reaches_the_shelf(region):
    """S2's observed cut reaches S1's shelf, never S2's own; without regions the chain is the
    zone."""
    depth = regional_depth(
        _observed(region),
        pl.DataFrame({"store_id": ["S1", "S2"], "week": [5, 5], "product_id": ["A", "A"]}),
        _regions(region),
    )
    assert depth.rows() == [("S1", 5, "A", pytest.approx(0.2))]


def test_price_multipliers_leave_display_and_mailer_alone():
    shelf = torch.tensor([[[0.0, 0.2, 1.0, 1.0, 1.0, 0.0], [0.1, 0.0, 0.0, 1.0, 0.0, 1.0]]])
    out = with_price_multipliers(shelf, torch.log(torch.tensor([1.25, 0.5])))
    torch.testing.assert_close(out[..., 4:], shelf[..., 4:])
    torch.testing.assert_close(out[0, :, 1], torch.tensor([0.0, 0.5]))  # 1 - 0.8 * 1.25; 1 - 0.5
