"""The planted-demand judge of a price path: the oracle's purchase probabilities times the
planted stock-up of each basket's price (D89, D132)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from retailsim_core.pricing.environment import PricingConfig
from retailsim_core.pricing.planted import PlantedDemand
from retailsim_core.synth.oracle import purchase_probabilities
from retailsim_core.synth.world import PlantedTruth, basket_file

WEEK = 9


@pytest.fixture(scope="module")
def judged(tiny_dataset):
    truth = PlantedTruth.read(tiny_dataset["truth"])
    baskets = pl.read_parquet(basket_file(tiny_dataset["truth"], WEEK)).head(40)
    depth = truth.world.prices.depth[WEEK]  # (P, R)
    cut = np.flatnonzero((depth > 0).any(1))[:2]  # products cut somewhere this week
    never = np.flatnonzero((depth == 0).all(1))[:2]  # products cut nowhere
    products = truth.world.catalogue.product_code[np.r_[cut, never]]
    demand = PlantedDemand(truth, [baskets.select("basket_id", "week")], products)
    return truth, demand, np.r_[cut, never]


def test_historical_units_are_the_oracle_times_the_stock_up_of_each_baskets_cut(judged):
    truth, demand, index = judged
    world, ctx = truth.world, demand.contexts[0]
    got = demand.units(WEEK, ctx, None)
    probs = purchase_probabilities(
        world, WEEK, ctx["customer_idx"].to_numpy(), ctx["store_idx"].to_numpy(),
        ctx["mission_focus"].to_list(), ctx["price_mode"].to_list(),
        ctx["basket_size"].to_list(),
    )[:, index]  # fmt: skip
    regions = world.catalogue.store_region[ctx["store_idx"].to_numpy()]
    ratio = 1.0 - world.prices.depth[WEEK][index][:, regions].T.astype(np.float64)
    s = world.cfg.behaviour.stock_up_elasticity
    np.testing.assert_allclose(got, probs * ratio**-s, rtol=1e-12)
    assert (ratio[:, :2] < 1).any() and (ratio[:, 2:] == 1).all()


def test_a_cut_on_the_path_sells_more_units_than_its_chance_alone(judged):
    truth, demand, _ = judged
    ctx = demand.contexts[0]
    regular = demand.units(WEEK, ctx, np.ones(4))
    cut = demand.units(WEEK, ctx, np.array([1.0, 1.0, 0.8, 1.0]))
    s = truth.world.cfg.behaviour.stock_up_elasticity
    # the planted chance of the cut product rises with its price; its units rise faster
    assert (cut[:, 2] >= regular[:, 2] * 0.8**-s - 1e-12).all() and cut[:, 2].sum() > 0
    zero = np.zeros((1, 4))
    lift = demand.lift([WEEK], zero, np.ones(4), PricingConfig())
    assert np.isfinite(lift)
