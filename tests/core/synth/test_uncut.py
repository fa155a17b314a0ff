"""The batched cut-removed probabilities equal one ``cut_removed`` oracle call per product, to
the bit, and the repertoire index finds every entry of a slot in order."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from retailsim_core.synth import build_world, preset
from retailsim_core.synth.oracle import cut_removed, purchase_probabilities, week_demand
from retailsim_core.synth.uncut import _RepertoireIndex, uncut_probabilities

WEEK = 60


def _one_at_a_time(world, demand, products, basket, ctx):
    """The reference: per pair, ``purchase_probabilities`` of its product inside
    ``cut_removed``, which rebuilds the product's slot and the regions it was cut in."""
    out = np.empty(len(products))
    for i, (p, b) in enumerate(zip(products, basket, strict=True)):
        with cut_removed(world, WEEK, demand, int(p)) as uncut:
            args = [c[[b]] for c in ctx]
            out[i] = purchase_probabilities(world, WEEK, *args, uncut, np.array([p]))[0, 0]
    return out


def test_uncut_probabilities_equal_the_cut_removed_oracle_to_the_bit():
    """Cut products with and without a complement partner, an uncut one, and baskets whose
    repertoire holds the product's slot (its weights change) or its partner's, or neither."""
    world = build_world(preset("tiny"))
    cat, pop = world.catalogue, world.population
    depth = world.prices.depth[WEEK]
    cut = np.flatnonzero(depth.any(1))
    products = np.r_[
        cut[cat.complement[cut] >= 0][:4], cut[cat.complement[cut] < 0][:4],
        np.flatnonzero(~depth.any(1))[:1],
    ]  # fmt: skip
    rng = np.random.default_rng(0)
    n_baskets = 300
    customer = rng.choice(np.flatnonzero(pop.carded), n_baskets)
    # Baskets whose repertoire holds the products' slots or their partners': the changed paths.
    slots = np.r_[cat.slot[products], cat.slot[np.maximum(cat.complement[products], 0)]]
    holders = np.flatnonzero(np.isin(pop.fav_slots, slots).any(1))
    customer[:100] = rng.choice(holders, 100)
    ctx = (
        customer,
        pop.home_store[customer],
        rng.integers(0, 4, n_baskets),
        rng.integers(0, 3, n_baskets),
        rng.integers(0, 3, n_baskets),
    )
    product = np.repeat(products, n_baskets)
    basket = np.tile(np.arange(n_baskets), len(products))
    demand = week_demand(world, WEEK)
    before = demand.explore.copy()
    got = uncut_probabilities(world, WEEK, demand, product, basket, *ctx)
    want = _one_at_a_time(world, demand, product, basket, ctx)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(demand.explore, before)  # the week's demand is untouched
    held = np.isin(pop.fav_slots[customer[basket]], cat.slot[product][:, None]).any(1)
    assert held.any() and (~held).any()  # both paths ran
    assert (got != purchase_probabilities(world, WEEK, *[c[basket] for c in ctx], demand)[
        np.arange(len(basket)), product]).any()  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    favs=st.lists(st.lists(st.integers(-1, 4), min_size=3, max_size=3), min_size=1, max_size=6),
    queries=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 4)), max_size=8),
)
def test_the_repertoire_index_finds_each_entry_in_order(favs, queries):
    """Repeated slots and padding (-1) included: every position of the slot in the basket's
    row, pairs in order, positions ascending; none for padding."""
    favs = np.array(favs)
    queries = [(b % len(favs), s) for b, s in queries]
    basket = np.array([b for b, _ in queries], dtype=np.int64)
    slot = np.array([s for _, s in queries], dtype=np.int64)
    index = _RepertoireIndex(favs, n_slots=5)
    pair, j = index.find(basket, slot)
    want = [(i, int(k)) for i, (b, s) in enumerate(queries) for k in np.flatnonzero(favs[b] == s)]
    assert list(zip(pair.tolist(), j.tolist(), strict=True)) == want
    np.testing.assert_array_equal(
        index.count(basket, slot), np.bincount(pair, minlength=len(queries))
    )
