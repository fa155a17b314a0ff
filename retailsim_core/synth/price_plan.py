"""Planted prices: regional list prices, permanent list-price rises and a promotion calendar.

Shelf price of product p at store t (region r, format f) in week w::

    regular[p, r, w] = base[p] * region_mult[p, r] * (rise_factor[p] if w >= rise_week[p] else 1)
    shelf[p, t, w]   = round(regular[p, r, w] * (1 - depth[w, p, r]) * format_mult[f], 2)

Promotions are set per product and region (half of them chain-wide) and last 1-3 weeks,
with at least two promotion-free weeks between two promotions of one product in one region.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retailsim_core.calendar import N_WEEKS
from retailsim_core.ingest.lgsr import STORE_REGION_CODES
from retailsim_core.synth.catalogue import FORMAT_PRICE_MULTIPLIER, Catalogue
from retailsim_core.synth.config import SynthConfig

N_REGIONS = len(STORE_REGION_CODES)
MIN_GAP_WEEKS = 2


@dataclass(frozen=True)
class PricePlan:
    region_mult: np.ndarray  # (P, R)
    rise_week: np.ndarray  # (P,) week of the permanent rise, N_WEEKS + 1 if none
    rise_factor: np.ndarray  # (P,)
    depth: np.ndarray  # (W + 1, P, R) float32 promotion depth; row 0 unused

    def regular(self, base_price: np.ndarray, week: int) -> np.ndarray:
        """(P, R) regular (non-promoted) price before the store-format multiplier."""
        rise = np.where(week >= self.rise_week, self.rise_factor, 1.0)
        return base_price[:, None] * self.region_mult * rise[:, None]

    def shelf(
        self, cat: Catalogue, week: int, products: np.ndarray, stores: np.ndarray
    ) -> np.ndarray:
        """Shelf price of each (product, store) pair, in pounds and pence."""
        r = cat.store_region[stores]
        rise = np.where(week >= self.rise_week[products], self.rise_factor[products], 1.0)
        regular = cat.base_price[products] * self.region_mult[products, r] * rise
        fmt = np.asarray(FORMAT_PRICE_MULTIPLIER)[cat.store_format[stores]]
        return np.round(regular * (1.0 - self.depth[week, products, r]) * fmt, 2)


def _promotion_calendar(
    cfg: SynthConfig, rng: np.random.Generator, launch_week: np.ndarray
) -> np.ndarray:
    n_p = len(launch_week)
    depth = np.zeros((N_WEEKS + 1, n_p, N_REGIONS), dtype=np.float32)
    remaining = np.zeros((n_p, N_REGIONS), dtype=np.int64)  # weeks left in the running promotion
    cooldown = np.zeros((n_p, N_REGIONS), dtype=np.int64)
    current = np.zeros((n_p, N_REGIONS), dtype=np.float32)
    depths = np.asarray(cfg.promo_depths, dtype=np.float32)
    for week in range(1, N_WEEKS + 1):  # a loop over weeks; everything inside is vectorised
        free = (remaining == 0) & (cooldown == 0) & (launch_week[:, None] <= week)
        national = rng.random(n_p) < cfg.promo_start_prob * cfg.national_promo_share
        regional = rng.random((n_p, N_REGIONS)) < cfg.promo_start_prob * (
            1 - cfg.national_promo_share
        )
        start = free & (national[:, None] | regional)
        new_depth = depths[rng.choice(len(depths), n_p, p=cfg.promo_depth_probs)]
        new_len = rng.integers(1, 4, n_p)
        current = np.where(start, new_depth[:, None], current)
        remaining = np.where(start, new_len[:, None], remaining)
        active = remaining > 0
        depth[week] = np.where(active, current, 0.0)
        ending = active & (remaining == 1)
        remaining = np.maximum(remaining - 1, 0)
        cooldown = np.where(ending, MIN_GAP_WEEKS, np.maximum(cooldown - 1, 0))
    return depth


def build_price_plan(cfg: SynthConfig, rng: np.random.Generator, cat: Catalogue) -> PricePlan:
    n_p = cat.n_products
    region_mult = np.clip(1.0 + rng.normal(0.0, 0.04, (n_p, N_REGIONS)), 0.9, 1.1)
    rises = rng.random(n_p) < cfg.price_rise_share
    rise_week = np.where(rises, rng.integers(20, 101, n_p), N_WEEKS + 1)
    rise_factor = np.where(rises, rng.uniform(1.03, 1.12, n_p), 1.0)
    depth = _promotion_calendar(cfg, rng, cat.launch_week)
    return PricePlan(
        region_mult=region_mult, rise_week=rise_week, rise_factor=rise_factor, depth=depth
    )
