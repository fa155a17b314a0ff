"""The forecasts' promotion responses scored against the generator's planted ones."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from retailsim_core.demand.response_recovery import (
    lift_recovery,
    planted_quantity_lift,
    planted_visit_lift,
)
from retailsim_core.synth import build_world, preset
from retailsim_core.synth.baskets import expected_visits


@pytest.fixture(scope="module")
def world():
    return build_world(preset("tiny"))


def _lifts(planted, forecast, units):
    return pl.DataFrame({"planted": planted, "forecast": forecast, "unit": units})


def test_recovery_is_perfect_for_a_proportional_response_and_none_for_a_shuffled_one():
    rng = np.random.default_rng(0)
    planted = np.exp(rng.normal(0, 0.3, 2_000))
    units = rng.integers(0, 100, 2_000)
    exact = lift_recovery(_lifts(planted, planted**0.5, units), "unit", n_boot=200, seed=0)
    assert exact["correlation"] == pytest.approx(1.0)
    assert exact["forecast_mean_lift"] < exact["planted_mean_lift"]
    assert exact["planted_mean_lift"] == pytest.approx(planted.mean())
    shuffled = lift_recovery(_lifts(planted, rng.permutation(planted), units), "unit", n_boot=200,
                             seed=0)  # fmt: skip
    low, high = shuffled["correlation_interval"]
    assert abs(shuffled["correlation"]) < 0.1 and low < 0 < high


def test_the_planted_visit_lift_is_the_mailers_change_in_the_chance_of_a_visit(world):
    pop, week = world.population, 30
    carded = np.flatnonzero(pop.carded)[:40]
    visits = pl.DataFrame({"customer_id": pop.code[carded], "week": week, "p_visit": 0.6,
                           "p_visit_no_mailer": 0.5})  # fmt: skip
    got = planted_visit_lift(world, visits)
    rate, bare = expected_visits(world, week)[carded], expected_visits(world, week, mailer=False)
    shops = bare[carded] > 0
    expected = (1 - np.exp(-rate[shops])) / (1 - np.exp(-bare[carded][shops]))
    assert got.height == shops.sum() and got["forecast"].to_list() == pytest.approx(
        [1.2] * got.height
    )
    np.testing.assert_allclose(got["planted"].to_numpy(), expected)
    assert (got["planted"] >= 1.0).all() and (got["planted"] > 1.0).any()


def test_the_planted_quantity_lift_reads_the_lines_cut(world):
    cat, depth = world.catalogue, world.prices.depth
    w, p, r = (a[0] for a in np.nonzero(depth))  # one promoted product x region x week
    store = int(np.flatnonzero(cat.store_region == r)[0])
    other = int(np.flatnonzero(depth[w, :, r] == 0)[0])
    lines = pl.DataFrame({
        "product_id": cat.product_code[[p, other]], "store_id": cat.store_code[[store, store]],
        "week": [w, w], "quantity_model": [3.0, 1.0], "quantity_no_promotion": [1.5, 1.0],
    })  # fmt: skip
    got = planted_quantity_lift(world, lines)
    s = world.cfg.behaviour.stock_up_elasticity
    assert got["planted"].to_list() == pytest.approx([(1 - depth[w, p, r]) ** -s, 1.0])
    assert got["forecast"].to_list() == [2.0, 1.0]
