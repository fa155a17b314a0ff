"""The promotion plan the generator writes, and the planted responses to it (issue #61).

The plan is what the retailer decides before the week: every promoted product is on display at
every open store of the region it is cut in; a cut at least ``mailer_min_depth`` deep is also
in that region's mailer. The generator writes it as one file per week beside the week's
transactions (``promotions_YYYYWW.csv``: PROD_CODE, STORE_CODE, DISPLAY, MAILER).

Two planted responses make traffic and quantity checkable against truth:

- **Traffic.** A shopper's visits in week w are Poisson(visit rate x exp(lift x n)) where n is
  the number of their favourite slots (capped) with a member in their home region's mailer
  that week: a mailer brings in the shoppers whose staples it advertises.
- **Quantity (stocking up).** A line of a product on a cut holds its drawn units plus
  Poisson(drawn units x (r^(-s) - 1)) more, where r = shelf price / regular price < 1 and s is
  the stock-up elasticity: E[units | line] = drawn units x r^(-s), a constant elasticity of
  the units per line to a cut's price (none at or above the regular price).

Glossary: P products, R regions, S slots, C customers, F repertoire width.
"""

from __future__ import annotations

import numpy as np
import polars as pl

PLAN_COLUMNS = ("PROD_CODE", "STORE_CODE", "DISPLAY", "MAILER")


def mailer(world, week: int) -> np.ndarray:
    """(P, R) bool: the products in each region's mailer in ``week``."""
    return world.prices.depth[week] >= world.cfg.mailer_min_depth


def mailer_favourites(world, week: int, customers: np.ndarray) -> np.ndarray:
    """(C,) how many of each shopper's favourite slots have a member in their home region's
    mailer in ``week``, capped at ``mailer_favourites_cap``."""
    cat, pop = world.catalogue, world.population
    in_mailer = mailer(world, week)  # (P, R)
    members = cat.slot_members  # (S, 2), -1 padding
    slot_in = (in_mailer[np.maximum(members, 0)] & (members >= 0)[:, :, None]).any(axis=1)  # (S, R)
    slots = pop.fav_slots[customers]  # (C, F)
    region = cat.store_region[pop.home_store[customers]]
    hit = slot_in[np.maximum(slots, 0), region[:, None]] & (slots >= 0)
    return np.minimum(hit.sum(axis=1), world.cfg.behaviour.mailer_favourites_cap)


def visit_multiplier(world, week: int, customers: np.ndarray) -> np.ndarray:
    """(C,) the planted factor on each shopper's visit rate in ``week`` from the mailer."""
    lift = world.cfg.behaviour.mailer_visit_lift
    return np.exp(lift * mailer_favourites(world, week, customers))


def units_multiplier(world, price_ratio: np.ndarray) -> np.ndarray:
    """E[units | line] over the drawn units at shelf price / regular price ``price_ratio``:
    ``ratio ** -s`` below the regular price, 1 at or above it."""
    s = world.cfg.behaviour.stock_up_elasticity
    ratio = np.clip(np.asarray(price_ratio, dtype=np.float64), 1e-3, None)
    return np.where(ratio < 1.0, ratio ** (-s), 1.0)


def stocked_up(world, drawn: np.ndarray, depth: np.ndarray, rng) -> np.ndarray:
    """Units of each line: the ``drawn`` units plus the planted stock-up on a cut of ``depth``
    (the shelf price over the regular price is ``1 - depth``; the store format scales both)."""
    extra = drawn * (units_multiplier(world, 1.0 - depth) - 1.0)
    return drawn + rng.poisson(extra)


def plan_frame(world, week: int) -> pl.DataFrame:
    """The week's plan as written: one row per promoted product x open store of its region,
    sorted by product and store (DISPLAY is always 1: every cut is on display)."""
    cat = world.catalogue
    depth = world.prices.depth[week]  # (P, R)
    stores = np.flatnonzero(cat.store_open_week <= week)
    p, t = np.nonzero(depth[:, cat.store_region[stores]] > 0)  # (product, open-store position)
    store = stores[t]
    in_mailer = mailer(world, week)[p, cat.store_region[store]]
    order = np.lexsort((cat.store_code[store], cat.product_code[p]))
    return pl.DataFrame(
        {
            "PROD_CODE": cat.product_code[p][order],
            "STORE_CODE": cat.store_code[store][order],
            "DISPLAY": np.full(len(p), "1"),
            "MAILER": np.where(in_mailer[order], "1", "0"),
        }
    )
