"""The generator's true purchase probabilities: the ceiling for every evaluation.

For a basket with K = 1 + Poisson(lam) draws from q, a slot with mass q_s is missed with
probability (1 - q_s) * exp(-lam * q_s); two slots are missed together with probability
(1 - q_a - q_b) * exp(-lam * (q_a + q_b)). A product p enters directly with
P(slot drawn) * pi_p (pi: its share of the slot), and a complement partner x pulls it in
with probability c when x entered directly. Hence, exactly,

    P(p absent) = A_p - c * (A_p - A_px)   for complement pairs (singleton slots)
    P(p absent) = 1 - (1 - A_s) * pi_p      otherwise

with A_p = P(slot of p not drawn) and A_px = P(neither drawn).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from retailsim_core.ingest.lgsr import MISSION_FOCI
from retailsim_core.synth.config import BASKET_SIZES, PRICE_MODES
from retailsim_core.synth.demand import (
    explore_distribution,
    product_avail,
    slot_factor,
    slot_probabilities,
)


def _index(vocab: tuple[str, ...], value) -> np.ndarray:
    values = np.atleast_1d(value)
    if values.dtype.kind in "iu":
        return values.astype(np.int64)
    lookup = {v: i for i, v in enumerate(vocab)}
    try:
        return np.array([lookup[v] for v in values])
    except KeyError as err:
        raise ValueError(f"{err.args[0]!r} is not one of {vocab}") from None


@dataclass(frozen=True)
class WeekDemand:
    """What every basket of a week shares: the products on the shelves and the slot shares."""

    avail: np.ndarray  # (P, R, M) availability weight by region and price mode
    factor: np.ndarray  # (S, R, M) slot totals of ``avail``
    explore: np.ndarray  # the week's explore distribution over slots


def week_demand(world, week: int, depth: np.ndarray | None = None) -> WeekDemand:
    """The week's shared demand; ``depth`` (P, R) replaces its planted cuts."""
    avail = product_avail(world, week, depth)
    factor = slot_factor(world, avail)
    return WeekDemand(avail, factor, explore_distribution(world, week, factor))


@contextmanager
def cut_removed(world, week: int, demand: WeekDemand, product: int) -> Iterator[WeekDemand]:
    """``demand`` (the week's) turned in place into ``week_demand(world, week, depth)`` for the
    week's planted cuts less ``product``'s, restored on leaving. Only the product's row, its
    slot's totals and the exploration of the regions it was cut in change; they are computed
    as the full call would (to the bit), so the cost is a slot and a few regions, not the
    catalogue, and nothing is copied."""
    cat = world.catalogue
    regions = np.flatnonzero(world.prices.depth[week][product] != 0)
    slot = cat.slot[product]
    saved = (demand.avail[product].copy(), demand.factor[slot].copy(), demand.explore[regions])
    try:
        if len(regions):
            zero = np.zeros((1, demand.avail.shape[1]))
            demand.avail[product] = product_avail(world, week, zero, [product])[0]
            members = np.flatnonzero(cat.slot == slot)
            totals = np.zeros((1,) + demand.avail.shape[1:])
            np.add.at(totals, np.zeros(len(members), np.int64), demand.avail[members])
            demand.factor[slot] = totals[0]  # as slot_factor adds them up, in member order
            explore = explore_distribution(world, week, demand.factor[:, regions])
            demand.explore[regions] = explore
        yield demand
    finally:
        demand.avail[product], demand.factor[slot], demand.explore[regions] = saved


def purchase_probabilities(
    world,
    week: int,
    customer,
    store,
    focus,
    price_mode,
    size,
    demand: WeekDemand | None = None,
    products: np.ndarray | None = None,
) -> np.ndarray:
    """(B, P) probability that each basket contains each product; (B, len(products)) for those
    catalogue indices only.

    ``customer`` and ``store`` are indices into the world; ``focus``, ``price_mode`` and ``size``
    are LGSR codes (``"Fresh"``, ``"LA"``, ``"M"``) or indices, broadcast against each other.
    ``demand``: ``week_demand(world, week)``, when the caller scores the week more than once.
    """
    cat, beh = world.catalogue, world.cfg.behaviour
    customer, store = np.atleast_1d(customer), np.atleast_1d(store)
    f, m, z = (
        _index(MISSION_FOCI, focus),
        _index(PRICE_MODES, price_mode),
        _index(BASKET_SIZES, size),
    )
    customer, store, f, m, z = np.broadcast_arrays(customer, store, f, m, z)
    region = cat.store_region[store]
    demand = week_demand(world, week) if demand is None else demand
    avail, factor, explore = demand.avail, demand.factor, demand.explore
    cols = np.arange(cat.n_products) if products is None else np.asarray(products)
    partner = cat.complement[cols]
    has = partner >= 0
    j, p, x = np.flatnonzero(has), cols[has], partner[has]  # column, product, its partner
    # Only the slots these columns read: the dense (B, S) mixture is most of the cost when a
    # caller asks for a few products (each entry is the dense one, to the bit).
    slots = None if products is None else np.unique(np.r_[cat.slot[cols], cat.slot[x]])
    q = slot_probabilities(world, week, factor, explore, customer, region, f, m, slots)
    s = cat.slot if slots is None else np.searchsorted(slots, cat.slot)  # product -> q column
    lam = np.asarray(beh.extra_draws_by_size)[z][:, None]

    def missed(columns):  # (B, len(columns)): P(slot never drawn)
        qs = q[:, columns]
        return (1.0 - qs) * np.exp(-lam * qs)

    own = cat.slot[cols]  # (C,) each column's slot
    share = avail[cols][:, region, m].T / np.maximum(factor[own][:, region, m].T, 1e-300)  # (B, C)
    absent = 1.0 - (1.0 - missed(s[cols])) * share
    a_p = missed(s[p])
    qp, qx = q[:, s[p]], q[:, s[x]]
    a_px = (1.0 - qp - qx) * np.exp(-lam * (qp + qx))
    # An unlaunched product has q = 0 (a_p = 1) and is never pulled in; an unlaunched
    # partner has q = 0, so a_px = a_p and the pull term vanishes by itself.
    pull = cat.complement_prob[p] * (cat.launch_week[p] <= week)
    absent[:, j] = a_p - pull * (a_p - a_px)
    return 1.0 - absent
