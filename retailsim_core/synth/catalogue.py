"""Planted catalogue: product hierarchy, stores, substitute and complement pairs.

Products are grouped into *slots*: a substitute pair shares one slot (a basket picks one
of the two by price), every other product is a slot of its own. Complement pairs are
products that pull each other into the basket.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from retailsim_core.ingest.lgsr import STORE_FORMAT_CODES, STORE_REGION_CODES
from retailsim_core.synth.config import DIVISIONS, SynthConfig

DIVISION_PRODUCT_SHARE = (0.35, 0.45, 0.20)
FORMAT_PROBS = (0.30, 0.30, 0.30, 0.10)  # LS, MS, SS, XLS
FORMAT_PRICE_MULTIPLIER = (1.00, 1.02, 1.08, 0.98)  # convenience stores charge more
FORMAT_SIZE_WEIGHT = (2.0, 1.5, 1.0, 3.0)  # how often a store is someone's home
SUBSTITUTE_EXPLORE_WEIGHT = 0.05  # substitute slots in exploration draws
SUBSTITUTE_REPERTOIRE_WEIGHT = 5.0  # ... and when repertoires are drawn


@dataclass(frozen=True)
class Catalogue:
    # products, index p
    product_code: np.ndarray  # "PRD0900001"
    cl: np.ndarray  # sub-commodity index
    division: np.ndarray  # index into DIVISIONS
    base_price: np.ndarray  # regular chain price at week 1
    popularity: np.ndarray
    elasticity: np.ndarray  # own-price elasticity (< 0)
    launch_week: np.ndarray
    rel_price: np.ndarray  # base price / sub-commodity median
    slot: np.ndarray  # slot of each product
    slot_share: np.ndarray  # share of its slot at regular prices
    complement: np.ndarray  # partner product or -1
    complement_prob: np.ndarray  # P(partner added | product drawn)
    # hierarchy codes per sub-commodity
    cl_codes: np.ndarray
    cl_dep_codes: np.ndarray
    cl_group_codes: np.ndarray
    cl_division_codes: np.ndarray
    cl_season_amp: np.ndarray
    cl_season_phase: np.ndarray
    # slots, index s: members (S, 2) with -1 padding
    slot_members: np.ndarray
    slot_explore_pop: np.ndarray  # weight of the slot in exploration draws
    slot_repertoire_pop: np.ndarray  # weight of the slot when repertoires are drawn
    # stores, index t
    store_code: np.ndarray
    store_region: np.ndarray  # index into STORE_REGION_CODES
    store_format: np.ndarray  # index into STORE_FORMAT_CODES
    store_open_week: np.ndarray

    @property
    def n_products(self) -> int:
        return len(self.product_code)

    @property
    def n_slots(self) -> int:
        return len(self.slot_members)


def _hierarchy(cfg: SynthConfig, rng: np.random.Generator):
    n_cl = max(len(DIVISIONS) * 2, cfg.n_products // cfg.products_per_sub_commodity)
    # Each group, department and sub-commodity belongs to one division.
    group_div = np.arange(cfg.n_groups) % len(DIVISIONS)
    dep_group = np.sort(rng.integers(0, cfg.n_groups, cfg.n_departments))
    dep_group[: cfg.n_groups] = np.arange(cfg.n_groups)  # no empty group
    cl_dep = np.sort(rng.integers(0, cfg.n_departments, n_cl))
    cl_dep[: cfg.n_departments] = np.arange(min(cfg.n_departments, n_cl))
    cl_div = group_div[dep_group[cl_dep]]
    # Products per division follow DIVISION_PRODUCT_SHARE; within it, uniform over its CLs.
    prod_div = rng.choice(len(DIVISIONS), cfg.n_products, p=DIVISION_PRODUCT_SHARE)
    prod_cl = np.empty(cfg.n_products, dtype=np.int64)
    for d in range(len(DIVISIONS)):  # 3 divisions, not rows
        cls = np.flatnonzero(cl_div == d)
        idx = np.flatnonzero(prod_div == d)
        prod_cl[idx] = cls[rng.integers(0, len(cls), len(idx))]
    order = np.lexsort((rng.random(cfg.n_products), prod_cl))  # product codes grouped by CL
    prod_cl = prod_cl[order]

    def codes(prefix, n, width):
        return np.array([f"{prefix}{i + 1:0{width}d}" for i in range(n)])

    cl_codes = codes("CL", n_cl, 5)
    dep_codes = codes("DEP", cfg.n_departments, 5)[cl_dep]
    group_codes = codes("G", cfg.n_groups, 5)[dep_group[cl_dep]]
    div_codes = codes("D", len(DIVISIONS), 5)[cl_div]
    return prod_cl, cl_div, cl_codes, dep_codes, group_codes, div_codes


def _substitute_pairs(cfg, rng, cl, base_price):
    """Adjacent-by-price products of one sub-commodity within 15% of each other."""
    order = np.lexsort((base_price, cl))
    a, b = order[:-1], order[1:]
    ok = (cl[a] == cl[b]) & (np.abs(np.log(base_price[a] / base_price[b])) < 0.15)
    ok &= np.arange(len(a)) % 2 == 0  # even positions only: pairs never share a product
    cand = np.flatnonzero(ok)
    take = np.sort(rng.choice(cand, min(cfg.n_substitute_pairs, len(cand)), replace=False))
    return a[take], b[take]


def _complement_pairs(cfg, rng, cl, excluded, popularity):
    """Pairs of products from different sub-commodities; like chips and salsa, planted
    complements are everyday items (above-median popularity)."""
    eligible = rng.permutation(np.flatnonzero(~excluded & (popularity >= np.median(popularity))))
    a, b = eligible[0:-1:2], eligible[1::2]
    keep = np.flatnonzero(cl[a] != cl[b])[: cfg.n_complement_pairs]
    return a[keep], b[keep]


def build_catalogue(cfg: SynthConfig, rng: np.random.Generator) -> Catalogue:
    prod_cl, cl_div, cl_codes, dep_codes, group_codes, div_codes = _hierarchy(cfg, rng)
    n_p, n_cl = cfg.n_products, len(cl_codes)
    cl_price = np.exp(rng.normal(np.log(2.0), 0.6, n_cl))
    base_price = np.maximum(np.round(cl_price[prod_cl] * np.exp(rng.normal(0, 0.3, n_p)), 2), 0.10)
    cl_median = (  # per product: the median regular price of its sub-commodity
        pl.DataFrame({"cl": prod_cl, "price": base_price})
        .select(pl.col("price").median().over("cl"))["price"]
        .to_numpy()
    )
    popularity = np.exp(rng.normal(0.0, 1.2, n_p))
    elasticity = rng.uniform(-3.0, -0.5, n_p)
    launch = np.ones(n_p, dtype=np.int64)
    novel = rng.random(n_p) < cfg.novel_product_share
    launch[novel] = rng.integers(81, 111, novel.sum())

    sub_a, sub_b = _substitute_pairs(cfg, rng, prod_cl, base_price)
    in_sub = np.zeros(n_p, bool)
    in_sub[sub_a] = in_sub[sub_b] = True
    comp_a, comp_b = _complement_pairs(cfg, rng, prod_cl, in_sub, popularity)
    complement = np.full(n_p, -1)
    complement[comp_a], complement[comp_b] = comp_b, comp_a
    complement_prob = np.zeros(n_p)
    pair_prob = rng.uniform(0.3, 0.6, len(comp_a))
    complement_prob[comp_a] = complement_prob[comp_b] = pair_prob

    # Slots: the first member of each substitute pair keeps the slot, the second joins it.
    leader = np.arange(n_p)
    leader[sub_b] = sub_a
    slot_of_leader = np.full(n_p, -1)
    leaders = np.flatnonzero(leader == np.arange(n_p))
    slot_of_leader[leaders] = np.arange(len(leaders))
    slot = slot_of_leader[leader]
    members = np.full((len(leaders), 2), -1)
    members[:, 0] = leaders
    members[slot[sub_b], 1] = sub_b
    pop_slot = popularity[leaders].copy()
    pop_slot[slot[sub_b]] += popularity[sub_b]
    slot_share = np.ones(n_p)
    # Substitutes are habitual staples whose buyers switch between the two by price: balanced
    # shares, often in repertoires, rarely picked by one-off exploration. That is the pattern
    # (shared customers, never in one basket) design §2.3.4 detects.
    share_a = rng.beta(10.0, 10.0, len(sub_a))
    slot_share[sub_a], slot_share[sub_b] = share_a, 1.0 - share_a
    is_pair = np.zeros(len(leaders), bool)
    is_pair[slot[sub_b]] = True
    explore_pop = np.where(is_pair, pop_slot * SUBSTITUTE_EXPLORE_WEIGHT, pop_slot)
    repertoire_pop = np.where(is_pair, pop_slot * SUBSTITUTE_REPERTOIRE_WEIGHT, pop_slot)

    stores = _stores(cfg, rng)
    return Catalogue(
        product_code=np.array([f"PRD09{i + 1:05d}" for i in range(n_p)]),
        cl=prod_cl,
        division=cl_div[prod_cl],
        base_price=base_price,
        popularity=popularity,
        elasticity=elasticity,
        launch_week=launch,
        rel_price=base_price / cl_median,
        slot=slot,
        slot_share=slot_share,
        complement=complement,
        complement_prob=complement_prob,
        cl_codes=cl_codes,
        cl_dep_codes=dep_codes,
        cl_group_codes=group_codes,
        cl_division_codes=div_codes,
        cl_season_amp=np.where(
            rng.random(n_cl) < cfg.seasonal_sub_commodity_share, rng.uniform(0.3, 0.8, n_cl), 0.0
        ),
        cl_season_phase=rng.uniform(0, 52, n_cl),
        slot_members=members,
        slot_explore_pop=explore_pop,
        slot_repertoire_pop=repertoire_pop,
        **stores,
    )


def _stores(cfg: SynthConfig, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n = cfg.n_stores
    region = np.arange(n) % len(STORE_REGION_CODES)  # every region has a store
    region = region[rng.permutation(n)]
    fmt = rng.choice(len(STORE_FORMAT_CODES), n, p=FORMAT_PROBS)
    open_week = np.ones(n, dtype=np.int64)
    # The late store sits in a region with another store, so its shoppers have a fallback.
    counts = np.bincount(region, minlength=len(STORE_REGION_CODES))
    late = np.flatnonzero(counts[region] >= 2)[0]
    open_week[late] = cfg.late_store_open_week
    return {
        "store_code": np.array([f"STORE{i + 1:05d}" for i in range(n)]),
        "store_region": region,
        "store_format": fmt,
        "store_open_week": open_week,
    }


def season_factor(cat: Catalogue, week_of_year: int) -> np.ndarray:
    """Seasonal demand multiplier per sub-commodity for an ISO week of the year."""
    return 1.0 + cat.cl_season_amp * np.cos(2 * np.pi * (week_of_year - cat.cl_season_phase) / 52.0)
