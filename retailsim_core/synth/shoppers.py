"""Planted shoppers: segments, home stores, visit rates, mission mixtures and repertoires.

Every shopper has a *repertoire* of favourite slots with preference weights; a draw comes
from the repertoire with the shopper's repeat share, otherwise from the shop-wide
exploration distribution. That is what makes ~90% of next-basket items repeats, as in LGSR.
Uncarded shoppers are modelled the same way; only their CUST_CODE is withheld in the files.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retailsim_core.ingest.lgsr import LIFESTAGE_CODES, MISSION_FOCI, MISSION_TYPES
from retailsim_core.synth.catalogue import FORMAT_SIZE_WEIGHT, Catalogue
from retailsim_core.synth.config import PRICE_MODES, SynthConfig
from retailsim_core.synth.sampling import rowwise_choice

SEGMENT_CODES = PRICE_MODES + ("XX",)
SEGMENT_PROBS = (0.30, 0.45, 0.20, 0.05)
LIFESTAGE_PROBS = (0.15, 0.18, 0.20, 0.17, 0.15, 0.10, 0.05)  # YA OA YF OF PE OT XX
EMPTY_LIFESTAGE_PROB = 0.03
TYPE_DIRICHLET = (6.0, 4.5, 3.0)  # Top Up, Small Shop, Full Shop
FOCUS_DIRICHLET = (2.0, 2.0, 2.5, 0.5)  # Fresh, Grocery, Mixed, Nonfood
OVERSAMPLE = 3  # draws per repertoire place (duplicates are dropped)


@dataclass(frozen=True)
class Population:
    code: np.ndarray  # "CUST0000000001", "" for uncarded shoppers
    carded: np.ndarray
    price_segment: np.ndarray  # index into SEGMENT_CODES
    lifestage: np.ndarray  # LGSR code or ""
    home_store: np.ndarray
    secondary_store: np.ndarray
    switch_prob: np.ndarray
    repeat_share: np.ndarray
    visit_rate: np.ndarray  # expected visits per week
    first_week: np.ndarray
    last_week: np.ndarray
    type_mix: np.ndarray  # (C, 3) over MISSION_TYPES
    focus_mix: np.ndarray  # (C, 4) over MISSION_FOCI
    fav_slots: np.ndarray  # (C, F) slot ids, -1 padding
    fav_pref: np.ndarray  # (C, F) preference weights, 0 on padding

    @property
    def n_customers(self) -> int:
        return len(self.code)


def _stores_for(cfg, rng, cat: Catalogue, n: int):
    """Home store weighted by format size; secondary store in the same region, open from week 1."""
    weight = np.asarray(FORMAT_SIZE_WEIGHT)[cat.store_format]
    home = rng.choice(len(weight), n, p=weight / weight.sum())
    # Secondary: a random other early-open store of the home region (the home itself if none).
    order = np.lexsort((rng.random(len(weight)), cat.store_region))
    early = cat.store_open_week[order] == 1
    region_sorted = cat.store_region[order]
    cand = order[early]
    cand_region = region_sorted[early]
    starts = np.searchsorted(cand_region, cat.store_region[home], side="left")
    ends = np.searchsorted(cand_region, cat.store_region[home], side="right")
    pick = starts + (rng.random(n) * (ends - starts)).astype(np.int64)
    secondary = cand[np.minimum(pick, len(cand) - 1)]
    clash = (secondary == home) & (ends - starts > 1)
    nxt = starts + (pick - starts + 1) % np.maximum(ends - starts, 1)
    secondary = np.where(clash, cand[np.minimum(nxt, len(cand) - 1)], secondary)
    return home, secondary


def _repertoires(cfg, rng, cat: Catalogue, behaviour, focus_mix, segment):
    """Each shopper's favourite slots, drawn without replacement by *successive sampling*:
    draw with replacement from the shopper's slot distribution and keep first occurrences,
    which has exactly the law of weighted sampling without replacement.

    The distribution is a mixture over foci, ``sum_f focus_mix[c, f] * G[f, segment_c]``,
    so each draw picks a focus, then a slot from one of Fo x 4 shared distributions G.
    """
    n, (f_lo, f_hi) = len(focus_mix), cfg.favourites_range
    leaders = cat.slot_members[:, 0]
    slot_pop = cat.slot_repertoire_pop
    fdw = np.asarray(behaviour.focus_division_weight)[:, cat.division[leaders]]  # (Fo, S)
    tier = (
        cat.rel_price[leaders][None, :] ** np.asarray(behaviour.tier_preference + (0.0,))[:, None]
    )  # (4, S)
    g = (slot_pop * fdw)[:, None, :] * tier[None, :, :]  # (Fo, 4, S)
    g = g.reshape(-1, g.shape[-1])
    draws = OVERSAMPLE * f_hi
    focus = (rng.random((n, draws, 1)) > np.cumsum(focus_mix, axis=1)[:, None, :]).sum(axis=2)
    focus = np.minimum(focus, fdw.shape[0] - 1)
    group = focus * tier.shape[0] + segment[:, None]  # (n, draws)
    cand = rowwise_choice(rng, g, group.ravel()).reshape(n, draws)
    # First occurrence of each slot in draw order, then the first `size` of those.
    order = np.argsort(cand * draws + np.arange(draws), axis=1)
    sorted_cand = np.take_along_axis(cand, order, axis=1)
    first_sorted = np.ones_like(sorted_cand, dtype=bool)
    first_sorted[:, 1:] = sorted_cand[:, 1:] != sorted_cand[:, :-1]
    first = np.empty_like(first_sorted)
    np.put_along_axis(first, order, first_sorted, axis=1)
    size = rng.integers(f_lo, f_hi + 1, n)
    keep = first & (np.cumsum(first, axis=1) <= size[:, None])
    pos = np.argsort(~keep, axis=1, kind="stable")[:, :f_hi]
    kept = np.take_along_axis(keep, pos, axis=1)
    slots = np.where(kept, np.take_along_axis(cand, pos, axis=1), -1)
    pref = np.where(kept, np.exp(rng.normal(0.0, 1.0, slots.shape)), 0.0)
    return slots, pref


def build_population(cfg: SynthConfig, rng: np.random.Generator, cat: Catalogue) -> Population:
    n, beh = cfg.n_customers, cfg.behaviour
    carded = rng.random(n) >= cfg.uncarded_share
    code = np.where(
        carded, np.char.add("CUST", np.char.zfill(np.arange(1, n + 1).astype(str), 10)), ""
    )
    segment = rng.choice(len(SEGMENT_CODES), n, p=SEGMENT_PROBS)
    lifestage = np.asarray(LIFESTAGE_CODES)[rng.choice(len(LIFESTAGE_CODES), n, p=LIFESTAGE_PROBS)]
    lifestage = np.where(rng.random(n) < EMPTY_LIFESTAGE_PROB, "", lifestage)
    home, secondary = _stores_for(cfg, rng, cat, n)
    first = np.where(rng.random(n) < cfg.late_customer_share, rng.integers(2, 111, n), 1)
    churn = rng.random(n) < cfg.churn_share
    last = np.where(churn, np.maximum(first + 8, rng.integers(30, 117, n)), 117)
    type_mix = rng.dirichlet(TYPE_DIRICHLET, n)
    focus_mix = rng.dirichlet(FOCUS_DIRICHLET, n)
    slots, pref = _repertoires(cfg, rng, cat, beh, focus_mix, segment)
    return Population(
        code=code,
        carded=carded,
        price_segment=segment,
        lifestage=lifestage,
        home_store=home,
        secondary_store=secondary,
        switch_prob=rng.beta(*cfg.switch_prob_beta, n),
        repeat_share=rng.beta(*cfg.repeat_share_beta, n),
        visit_rate=rng.gamma(2.0, cfg.mean_visits_per_week / 2.0, n),
        first_week=first,
        last_week=np.minimum(last, 117),
        type_mix=type_mix,
        focus_mix=focus_mix,
        fav_slots=slots,
        fav_pref=pref,
    )


assert len(TYPE_DIRICHLET) == len(MISSION_TYPES) and len(FOCUS_DIRICHLET) == len(MISSION_FOCI)
