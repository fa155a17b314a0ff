"""The oracle's purchase probabilities match the simulator's empirical frequencies."""

import numpy as np
import pytest

from retailsim_core.ingest.lgsr import MISSION_FOCI
from retailsim_core.synth import build_world, preset
from retailsim_core.synth.baskets import draw_basket_lines
from retailsim_core.synth.config import BASKET_SIZES, PRICE_MODES
from retailsim_core.synth.oracle import cut_removed, purchase_probabilities, week_demand

N = 40_000


@pytest.fixture(scope="module")
def world():
    return build_world(preset("tiny"))


@pytest.mark.parametrize(
    "focus,mode,size,week",
    [("Fresh", "LA", "M", 30), ("Nonfood", "UM", "L", 100), ("Mixed", "MM", "S", 90)],
)
def test_oracle_matches_monte_carlo(world, focus, mode, size, week):
    cat = world.catalogue
    carded = np.flatnonzero(world.population.carded)
    customer = int(carded[3])
    store = int(world.population.home_store[customer])
    probs = purchase_probabilities(world, week, customer, store, focus, mode, size)[0]
    rng = np.random.default_rng(0)

    def ctx(vocab, v):
        return np.full(N, vocab.index(v))

    b, p, _ = draw_basket_lines(
        world,
        week,
        np.full(N, customer),
        np.full(N, store),
        ctx(MISSION_FOCI, focus),
        ctx(PRICE_MODES, mode),
        ctx(BASKET_SIZES, size),
        rng,
    )
    empirical = np.bincount(p, minlength=cat.n_products) / N
    tolerance = 5 * np.sqrt(probs * (1 - probs) / N) + 2e-4
    assert np.all(np.abs(empirical - probs) <= tolerance), np.max(
        np.abs(empirical - probs) - tolerance
    )
    assert np.all(probs[cat.launch_week > week] == 0)
    # The expected basket size is consistent too.
    assert abs(probs.sum() - len(p) / N) < 0.05 * probs.sum()


def test_oracle_covers_substitutes_and_complements(world):
    """Pairs exist in the tiny world, so the test above exercised both code paths."""
    cat = world.catalogue
    assert (cat.slot_members[:, 1] >= 0).sum() > 0
    assert (cat.complement >= 0).sum() > 0


def test_oracle_rejects_unknown_codes(world):
    with pytest.raises(ValueError, match="not one of"):
        purchase_probabilities(world, 10, 0, 0, "Frozen", "LA", "M")


def test_a_weeks_shared_demand_built_once_gives_the_same_probabilities(world):
    carded = np.flatnonzero(world.population.carded)[:5]
    store = world.population.home_store[carded]
    args = (carded, store, "Fresh", "LA", "M")
    direct = purchase_probabilities(world, 40, *args)
    np.testing.assert_array_equal(
        purchase_probabilities(world, 40, *args, week_demand(world, 40)), direct
    )
    other = purchase_probabilities(world, 40, *args, week_demand(world, 100))
    assert not np.array_equal(other, direct)  # the demand passed in is the one used


def test_some_products_are_the_full_matrix_columns(world):
    """``products`` computes only those columns, complement pairs included, to the bit."""
    cat = world.catalogue
    carded = np.flatnonzero(world.population.carded)[:5]
    store = world.population.home_store[carded]
    args = (world, 60, carded, store, "Mixed", "MM", "M")
    full = purchase_probabilities(*args)
    cols = np.r_[np.flatnonzero(cat.complement >= 0)[:3], np.flatnonzero(cat.complement < 0)[:3]]
    cols = np.r_[cols, cols[:1]]  # a repeat too
    np.testing.assert_array_equal(purchase_probabilities(*args, products=cols), full[:, cols])


def test_a_removed_cut_is_the_full_counterfactual_to_the_bit_and_is_undone(world):
    """``cut_removed`` (one slot, the cut's regions) equals ``week_demand`` with the product's
    row of cuts zeroed, for one-region and many-region cuts and an uncut product; leaving it
    restores the week's demand exactly."""
    week = 60
    depth = world.prices.depth[week]
    regions = (depth != 0).sum(1)
    picks = [int(np.flatnonzero(regions == 1)[0]), int(regions.argmax()), int(regions.argmin())]
    assert regions[picks[1]] > 1 and regions[picks[2]] == 0
    demand = week_demand(world, week)
    before = {part: getattr(demand, part).copy() for part in ("avail", "factor", "explore")}
    carded = np.flatnonzero(world.population.carded)[:50]
    args = (carded, world.population.home_store[carded], "Mixed", "LA", "M")
    parts = ("avail", "factor", "explore")
    for product in picks:
        plan = depth.copy()
        plan[product] = 0.0
        full = week_demand(world, week, plan)
        with cut_removed(world, week, demand, product) as uncut:
            for part in parts:
                np.testing.assert_array_equal(getattr(uncut, part), getattr(full, part))
            np.testing.assert_array_equal(
                purchase_probabilities(world, week, *args, uncut, products=np.array([product])),
                purchase_probabilities(world, week, *args, full)[:, [product]],
            )
        for part, want in before.items():
            np.testing.assert_array_equal(getattr(demand, part), want)
