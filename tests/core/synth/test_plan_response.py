"""The promotion plan the generator writes and the traffic and quantity responses it plants."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest

from retailsim_core.synth import build_world, preset
from retailsim_core.synth.baskets import expected_visits
from retailsim_core.synth.plan_response import (
    mailer,
    mailer_favourites,
    plan_frame,
    stocked_up,
    units_multiplier,
    visit_multiplier,
)


@pytest.fixture(scope="module")
def world():
    return build_world(preset("tiny"))


def _with_behaviour(world, **changes):
    beh = dataclasses.replace(world.cfg.behaviour, **changes)
    return dataclasses.replace(world, cfg=world.cfg.replace(behaviour=beh))


def test_the_plan_lists_every_cut_at_every_open_store_of_its_region(world):
    cat, week = world.catalogue, 30
    plan = plan_frame(world, week)
    depth = world.prices.depth[week]
    expected = {
        (cat.product_code[p], cat.store_code[t])
        for p in range(cat.n_products)
        for t in range(len(cat.store_code))
        if cat.store_open_week[t] <= week and depth[p, cat.store_region[t]] > 0
    }
    assert set(plan.select("PROD_CODE", "STORE_CODE").rows()) == expected
    assert plan.height == len(expected) and (plan["DISPLAY"] == "1").all()
    p = np.searchsorted(cat.product_code, plan["PROD_CODE"].to_numpy())
    t = np.searchsorted(cat.store_code, plan["STORE_CODE"].to_numpy())
    deep = depth[p, cat.store_region[t]] >= world.cfg.mailer_min_depth
    assert ((plan["MAILER"] == "1").to_numpy() == deep).all() and 0 < deep.sum() < len(deep)
    assert plan.equals(plan.sort("PROD_CODE", "STORE_CODE"))


def test_mailer_favourites_count_the_shoppers_slots_in_their_home_regions_mailer(world):
    cat, pop, week = world.catalogue, world.population, 30
    customers = np.arange(pop.n_customers)
    got = mailer_favourites(world, week, customers)
    in_mailer = mailer(world, week)
    cap = world.cfg.behaviour.mailer_favourites_cap
    for c in customers:  # the oracle: one shopper at a time, slot by slot
        region = cat.store_region[pop.home_store[c]]
        slots = [s for s in pop.fav_slots[c] if s >= 0]
        hits = sum(any(in_mailer[m, region] for m in cat.slot_members[s] if m >= 0) for s in slots)
        assert got[c] == min(hits, cap)
    assert got.max() > 0


def test_the_mailer_raises_only_the_visits_of_shoppers_it_advertises_to(world):
    week = 30
    n = mailer_favourites(world, week, np.arange(world.population.n_customers))
    with np.errstate(invalid="ignore"):  # 0 / 0 for a shopper who does not shop that week
        lift = expected_visits(world, week) / expected_visits(world, week, mailer=False)
    active = np.isfinite(lift)
    expected = np.exp(world.cfg.behaviour.mailer_visit_lift * n)
    np.testing.assert_allclose(lift[active], expected[active])
    flat = _with_behaviour(world, mailer_visit_lift=0.0)
    assert (visit_multiplier(flat, week, np.arange(5)) == 1.0).all()


def test_stocking_up_is_a_constant_elasticity_below_the_regular_price(world):
    s = world.cfg.behaviour.stock_up_elasticity
    ratio = np.array([0.5, 0.75, 0.9, 1.0, 1.2])
    np.testing.assert_allclose(units_multiplier(world, ratio), [0.5**-s, 0.75**-s, 0.9**-s, 1, 1])
    rng = np.random.default_rng(0)
    drawn = np.full(200_000, 2)
    units = stocked_up(world, drawn, np.full(len(drawn), 0.25), rng)
    assert units.min() >= 2 and units.mean() == pytest.approx(2 * 0.75**-s, rel=0.01)
    assert (stocked_up(world, drawn[:100], np.zeros(100), rng) == 2).all()


def test_every_generated_week_has_its_plan_file(tiny_dataset):
    raw = tiny_dataset["raw"]
    plans = sorted(p.name for p in raw.glob("promotions_*.csv"))
    weeks = sorted(p.name for p in raw.glob("transactions_*.csv"))
    assert len(plans) == len(weeks) + 1  # week 4's sales are missing, never its plan
    plan = pl.read_csv(raw / "promotions_200607.csv", infer_schema=False)
    assert plan.columns == ["PROD_CODE", "STORE_CODE", "DISPLAY", "MAILER"] and plan.height > 0
