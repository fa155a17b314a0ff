"""The planted demand model, shared by the basket simulator and the oracle.

Glossary of dimensions: P products, S slots, R regions (12), M price modes (LA, MM, UM),
Fo mission foci (4), B baskets, F repertoire width.

A basket of shopper c at a store of region r in week w on mission (focus f, price mode m,
size z) makes K = 1 + Poisson(lambda_z) draws over slots from

    q[s] = rho_c * personal[c, s] + (1 - rho_c) * explore[r, f, m, s]

Inside a drawn slot the basket picks one member product with probability proportional to
``avail[p, r, m] = slot_share[p] * launched[p, w] * (1 - depth[w, p, r]) ** (elasticity[p] * k_m)``.
"""

from __future__ import annotations

import numpy as np

from retailsim_core.calendar import monday_of
from retailsim_core.synth.catalogue import season_factor


def week_of_year(week: int) -> int:
    return monday_of(week).isocalendar()[1]


def product_avail(world, week: int, depth: np.ndarray | None = None, products=None) -> np.ndarray:
    """(P, R, M) unnormalised choice weight of each product within its slot; ``depth`` (P, R)
    replaces the week's planted cuts (a counterfactual shelf). ``products`` (C,): those rows
    only, ``depth`` then (C, R)."""
    cat, beh = world.catalogue, world.cfg.behaviour
    rows = slice(None) if products is None else np.asarray(products)
    depth = world.prices.depth[week][rows] if depth is None else depth
    ratio = 1.0 - depth.astype(np.float64)  # (P, R)
    exponent = cat.elasticity[rows, None] * np.asarray(beh.elasticity_multiplier)  # (P, M)
    launched = (cat.launch_week[rows] <= week).astype(np.float64)
    weight = (cat.slot_share[rows] * launched)[:, None, None]  # (P, 1, 1)
    return weight * ratio[:, :, None] ** exponent[:, None, :]


def slot_factor(world, avail: np.ndarray) -> np.ndarray:
    """(S, R, M) price-and-availability multiplier of each slot: the sum over its members."""
    out = np.zeros((world.catalogue.n_slots,) + avail.shape[1:])
    np.add.at(out, world.catalogue.slot, avail)
    return out


def _slot_static(world, week: int):
    cat = world.catalogue
    leaders = cat.slot_members[:, 0]
    slot_cl = cat.cl[leaders]
    season = season_factor(cat, week_of_year(week))[slot_cl]  # (S,)
    return leaders, cat.division[leaders], season, cat.slot_explore_pop


def explore_weights(world, week: int) -> np.ndarray:
    """(1, Fo, M, S) the week's exploration weight of each slot before its price-and-availability
    factor: what every ``explore_distribution`` of the week shares."""
    cat, beh = world.catalogue, world.cfg.behaviour
    leaders, slot_div, season, slot_pop = _slot_static(world, week)
    fdw = np.asarray(beh.focus_division_weight)[:, slot_div]  # (Fo, S)
    tier = cat.rel_price[leaders][None, :] ** np.asarray(beh.tier_preference)[:, None]  # (M, S)
    return (slot_pop * season)[None, None, None, :] * fdw[None, :, None, :] * tier[None, None, :, :]


def explore_distribution(
    world, week: int, factor: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """(R, Fo, M, S) exploration distribution over slots, rows sum to 1; ``weights``:
    ``explore_weights(world, week)``, when the caller builds the week's distribution often."""
    w = explore_weights(world, week) if weights is None else weights
    w = w * factor.transpose(1, 2, 0)[:, None, :, :]  # (R, Fo, M, S)
    return w / w.sum(axis=-1, keepdims=True)


def personal_weights(
    world,
    week: int,
    factor: np.ndarray,
    customer: np.ndarray,
    region: np.ndarray,
    focus: np.ndarray,
    mode: np.ndarray,
) -> np.ndarray:
    """(B, F) unnormalised repertoire weights of each basket; 0 on padding."""
    slots, safe, weight = repertoire(world, week, customer, focus)
    return np.where(slots >= 0, weight * factor[safe, region[:, None], mode[:, None]], 0.0)


def repertoire(world, week: int, customer: np.ndarray, focus: np.ndarray):
    """(B, F) thrice: each basket's repertoire slots (-1: padding), the same with padding at 0,
    and their weights before the slots' price-and-availability factor."""
    pop, beh = world.population, world.cfg.behaviour
    _, slot_div, season, _ = _slot_static(world, week)
    slots = pop.fav_slots[customer]  # (B, F)
    safe = np.maximum(slots, 0)
    fdw = np.asarray(beh.focus_division_weight)[focus[:, None], slot_div[safe]]
    return slots, safe, pop.fav_pref[customer] * fdw * season[safe]


def slot_probabilities(world, week, factor, explore, customer, region, focus, mode, slots=None):
    """(B, S) the mixture q of each basket, for the oracle; (B, len(slots)) for those distinct
    slots only, each entry computed as in the dense matrix (the same operations, same order)."""
    pers = personal_weights(world, week, factor, customer, region, focus, mode)
    total = pers.sum(axis=1, keepdims=True)
    rho = np.where(total[:, 0] > 0, world.population.repeat_share[customer], 0.0)
    favs = world.population.fav_slots[customer].ravel()
    if slots is None:
        q = (1.0 - rho)[:, None] * explore[region, focus, mode]
        column = favs
    else:
        picked = explore[region[:, None], focus[:, None], mode[:, None], slots[None, :]]
        q = (1.0 - rho)[:, None] * picked  # (B, C)
        lookup = np.full(explore.shape[-1], -1)
        lookup[slots] = np.arange(len(slots))
        column = np.where(favs >= 0, lookup[np.maximum(favs, 0)], -1)
    rows = np.repeat(np.arange(len(customer)), pers.shape[1])
    contrib = (rho[:, None] * pers / np.where(total > 0, total, 1.0)).ravel()
    keep = column >= 0
    np.add.at(q, (rows[keep], column[keep]), contrib[keep])
    return q
