"""Simulate one shop week of baskets from a planted world (vectorised over baskets and draws).

Each week draws from its own random stream (seed, week), so weeks can be generated one at a
time in bounded memory and any week is reproducible on its own.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np

from retailsim_core.calendar import lgsr_weekday, monday_of
from retailsim_core.ingest.lgsr import MISSION_FOCI, MISSION_TYPES
from retailsim_core.synth.config import BASKET_SIZES, PRICE_MODES
from retailsim_core.synth.demand import (
    explore_distribution,
    personal_weights,
    product_avail,
    slot_factor,
)
from retailsim_core.synth.plan_response import stocked_up, visit_multiplier
from retailsim_core.synth.sampling import categorical, rowwise_choice

HOURS = np.arange(8, 23)
# Hour profile by mission type: top-ups peak after work, full shops late morning.
_HOUR_BASE = np.array([2, 4, 6, 8, 8, 7, 6, 6, 7, 9, 9, 7, 5, 3, 0.1])
_HOUR_TILT = np.linspace(-1, 1, len(HOURS))
HOUR_PROBS = np.stack([_HOUR_BASE * np.exp(t * _HOUR_TILT) for t in (0.6, 0.0, -0.6)])
HOUR_PROBS /= HOUR_PROBS.sum(axis=1, keepdims=True)
MAX_VISITS_PER_WEEK = 4


@dataclass(frozen=True)
class WeekBaskets:
    """One row per basket (``b_*``) and one row per basket line (``l_*``)."""

    b_customer: np.ndarray
    b_store: np.ndarray
    b_date: np.ndarray  # datetime64[D]
    b_hour: np.ndarray
    b_type: np.ndarray  # index into MISSION_TYPES
    b_focus: np.ndarray  # index into MISSION_FOCI
    b_mode: np.ndarray  # index into PRICE_MODES
    b_size: np.ndarray  # index into BASKET_SIZES
    l_basket: np.ndarray
    l_product: np.ndarray
    l_quantity: np.ndarray
    l_spend: np.ndarray


def expected_visits(world, week: int, *, mailer: bool = True) -> np.ndarray:
    """(C,) each shopper's Poisson visit rate in ``week`` before the weekly cap: their rate,
    Christmas, whether they shop at all that week and (``mailer``) the week's mailer."""
    pop, beh = world.population, world.cfg.behaviour
    monday = monday_of(week)
    xmas = dt.date(monday.year, 12, 25)
    factor = beh.christmas_visit_factor if 0 <= (xmas - monday).days < 7 else 1.0
    active = (pop.first_week <= week) & (week <= pop.last_week)
    rate = pop.visit_rate * factor * active
    return rate * visit_multiplier(world, week, np.arange(pop.n_customers)) if mailer else rate


def _visits(world, week: int, rng) -> np.ndarray:
    n = np.minimum(rng.poisson(expected_visits(world, week)), MAX_VISITS_PER_WEEK)
    return np.repeat(np.arange(world.population.n_customers), n)


def _stores(world, week: int, customer: np.ndarray, rng) -> np.ndarray:
    cat, pop, beh = world.catalogue, world.population, world.cfg.behaviour
    home = pop.home_store[customer]
    home = np.where(cat.store_open_week[home] <= week, home, pop.secondary_store[customer])
    open_now = np.flatnonzero(cat.store_open_week <= week)
    anywhere = open_now[rng.integers(0, len(open_now), len(customer))]
    switch = rng.random(len(customer)) < pop.switch_prob[customer]
    secondary = rng.random(len(customer)) < beh.switch_to_secondary_prob
    return np.where(switch, np.where(secondary, pop.secondary_store[customer], anywhere), home)


def simulate_week(world, week: int) -> WeekBaskets:
    cfg, cat, pop, beh = world.cfg, world.catalogue, world.population, world.cfg.behaviour
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 1, week]))
    customer = _visits(world, week, rng)
    n_b = len(customer)
    store = _stores(world, week, customer, rng)
    mtype = categorical(rng, pop.type_mix[customer])
    size = categorical(rng, np.asarray(beh.size_given_type)[mtype])
    focus = categorical(rng, pop.focus_mix[customer])
    own = pop.price_segment[customer]
    keep_own = (own < len(PRICE_MODES)) & (rng.random(n_b) < beh.own_price_mode_prob)
    mode = np.where(keep_own, own, rng.integers(0, len(PRICE_MODES), n_b))
    weekday = categorical(rng, np.tile(np.asarray(beh.weekday_probs), (n_b, 1))) + 1
    monday = np.datetime64(monday_of(week).isoformat())
    date = monday + ((weekday - lgsr_weekday(monday_of(week))) % 7).astype("timedelta64[D]")
    hour = HOURS[categorical(rng, HOUR_PROBS[mtype])]

    l_b, l_p, drawn = draw_basket_lines(world, week, customer, store, focus, mode, size, rng)
    depth = world.prices.depth[week, l_p, cat.store_region[store[l_b]]]
    l_q = stocked_up(world, drawn, depth, rng)
    price = world.prices.shelf(cat, week, l_p, store[l_b])
    return WeekBaskets(
        b_customer=customer,
        b_store=store,
        b_date=date,
        b_hour=hour,
        b_type=mtype,
        b_focus=focus,
        b_mode=mode,
        b_size=size,
        l_basket=l_b,
        l_product=l_p,
        l_quantity=l_q,
        l_spend=np.round(l_q * price, 2),
    )


def draw_basket_lines(
    world,
    week: int,
    customer: np.ndarray,
    store: np.ndarray,
    focus: np.ndarray,
    mode: np.ndarray,
    size: np.ndarray,
    rng: np.random.Generator,
):
    """Basket contents for given contexts: (basket index, product, quantity) per line.

    Each basket makes K = 1 + Poisson(lambda_size) draws from the mixture q (see demand.py),
    buys one member of each drawn slot, and complements pull their partners in.
    """
    cat, pop, beh = world.catalogue, world.population, world.cfg.behaviour
    n_b, region = len(customer), cat.store_region[store]
    avail = product_avail(world, week)  # (P, R, M)
    factor = slot_factor(world, avail)  # (S, R, M)
    explore = explore_distribution(world, week, factor)  # (R, Fo, M, S)
    pers = personal_weights(world, week, factor, customer, region, focus, mode)  # (B, F)
    has_pers = pers.sum(axis=1) > 0
    k = 1 + rng.poisson(np.asarray(beh.extra_draws_by_size)[size])
    d_basket = np.repeat(np.arange(n_b), k)
    from_pers = (rng.random(len(d_basket)) < pop.repeat_share[customer][d_basket]) & has_pers[
        d_basket
    ]
    slot = np.empty(len(d_basket), dtype=np.int64)
    pb = d_basket[from_pers]
    slot[from_pers] = pop.fav_slots[customer[pb], rowwise_choice(rng, pers, pb)]
    eb = d_basket[~from_pers]
    groups = (region * len(MISSION_FOCI) + focus) * len(PRICE_MODES) + mode
    slot[~from_pers] = rowwise_choice(rng, explore.reshape(-1, explore.shape[-1]), groups[eb])

    # Count draws per (basket, slot); the basket buys one member of each drawn slot.
    key, qty = np.unique(d_basket * cat.n_slots + slot, return_counts=True)
    bsk, slt = key // cat.n_slots, key % cat.n_slots
    members = cat.slot_members[slt]  # (N, 2)
    w = np.where(
        members >= 0, avail[np.maximum(members, 0), region[bsk, None], mode[bsk, None]], 0.0
    )
    product = members[np.arange(len(slt)), rowwise_choice(rng, w, np.arange(len(slt)))]

    # Complements: a drawn product pulls its partner in with the pair's probability.
    partner = cat.complement[product]
    pull = (partner >= 0) & (rng.random(len(product)) < cat.complement_prob[product])
    pulled = partner[pull]
    pulled_ok = cat.launch_week[pulled] <= week
    all_b = np.concatenate([bsk, bsk[pull][pulled_ok]])
    all_p = np.concatenate([product, pulled[pulled_ok]])
    all_q = np.concatenate([qty, np.ones(pulled_ok.sum(), dtype=qty.dtype)])
    _, first = np.unique(all_b * cat.n_products + all_p, return_index=True)  # direct draws win
    return all_b[first], all_p[first], all_q[first]


assert HOUR_PROBS.shape == (len(MISSION_TYPES), len(HOURS)) and len(BASKET_SIZES) == 3
