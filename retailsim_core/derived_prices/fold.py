"""Folding one week into the slot-aligned price state: the NumPy reference (D50).

:func:`fold_week_numpy` takes ~60 vectorised passes over the N cells to date. At the ``large``
preset's 1.2M cells each pass streams ~10 MB through memory, so the week is memory-bound;
``kernel.py`` runs the same steps compiled, bitwise equal to this reference (tested).

It takes the state after weeks < W with week W's cells already added, updates it in place to
after week W, and returns the week's columns (``COLUMNS``) for slots ``0..N-1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retailsim_core.derived_prices import VALIDATION_FLAG_BITS
from retailsim_core.derived_prices.state import CellState

MICRO = (
    1_000_000  # level-2 sums in integer millionths: exact in any order, so a resumed run matches
)
_BASE_QUALITY = np.array(
    [0.85, 0.6, 0.45, 0.3]
)  # by imputation method (also in price_week.c); >= 3 lines: 1.0
_POPCOUNT = np.array(
    [bin(i).count("1") for i in range(256)], np.float64
)  # broken rules per flag byte
# (name, dtype) of what a week returns, per slot.
COLUMNS = (
    ("actual_price", np.float64),
    ("base_price", np.float64),
    ("reference_price", np.float64),
    ("discount_depth", np.float64),
    ("base_discount_depth", np.float64),
    ("quality_score", np.float64),
    ("observed_price", np.float64),
    ("missing_share", np.float64),
    ("price_cv", np.float64),
    ("price_sum_to_date", np.float64),
    ("price_sumsq_to_date", np.float64),
    ("promo_flag", np.bool_),
    ("validation_flags", np.uint8),
    ("method", np.uint8),
    ("first_week", np.int16),
    ("product_first_week", np.int16),
    ("n_obs_to_date", np.int32),
    ("product_obs_weeks", np.int32),
    ("n_lines", np.uint32),
    ("units", np.int64),
)


@dataclass(frozen=True)
class WeekInput:
    """Week W's observations (distinct slots) and the per-product-region means of its prices."""

    slots: np.ndarray  # (K,) int64
    price: np.ndarray  # (K,) float64
    n_lines: np.ndarray  # (K,) uint32
    units: np.ndarray  # (K,) int64
    regular: np.ndarray  # (K,) float64, the source's regular shelf price; NaN where not recorded
    region_mean: np.ndarray  # (R,) float64, NaN where the product was not sold in the region
    new_head: int  # the last-price row that becomes week W's


# The columns a fold returns, in the order the compiled kernel's caller and the tables expect.
FOLD_COLUMNS = (
    "actual_price",
    "base_price",
    "reference_price",
    "discount_depth",
    "base_discount_depth",
    "quality_score",
    "observed_price",
    "missing_share",
    "price_cv",
    "price_sum_to_date",
    "price_sumsq_to_date",
    "promo_flag",
    "validation_flags",
    "method",
    "first_week",
    "product_first_week",
    "n_obs_to_date",
    "product_obs_weeks",
    "n_lines",
    "units",
)


def micro(prices: np.ndarray) -> np.ndarray:
    return np.rint(prices * MICRO).astype(np.int64)


def fold_week_numpy(state: CellState, week: int, obs: WeekInput) -> dict[str, np.ndarray]:
    """The reference: the steps of ``price_week.c`` as NumPy passes."""
    own_max, lines, units = _observe(state, week, obs)
    actual, method, observed_price = _waterfall(state, obs)
    base, reference, depth, base_depth = _reference_prices(state, obs, actual, own_max)
    columns = _checked_columns(state, week, actual, method, base, depth, lines)
    columns |= {
        "base_price": base,
        "reference_price": reference,
        "discount_depth": depth,
        "base_discount_depth": base_depth,
        "observed_price": observed_price,
        "promo_flag": depth > state.cfg.promo_threshold,
        "n_lines": lines,
        "units": units,
    }
    state.slot["prev_price"][obs.new_head] = actual
    state.slot["prev_base"][:] = base
    return {name: columns[name] for name in FOLD_COLUMNS}


def _observe(state: CellState, week: int, obs: WeekInput):
    """Steps 1-2: the ring of the last H weeks' prices takes week W (each window loses the week
    that leaves it) and the week's observations; -> (the cells' reference-window maxima, lines,
    units)."""
    cfg, h, s, n = state.cfg, state.cfg.history_weeks, state.slot, state.n
    slots, price, history = obs.slots, obs.price, s["history"]
    for window, count in ((cfg.reference_window, "own_n"), (cfg.store_mean_window, "l2_n")):
        leaving = history[(week - window) % h]
        gone = ~np.isnan(leaving)
        counts = s[count]  # a view: subtract in place
        counts -= gone
        if count == "l2_n":
            s["l2_sum"][gone] -= micro(leaving[gone])
    history[week % h] = np.nan
    s["n_obs"][slots] += 1
    s["price_sum"][slots] += price
    s["price_sumsq"][slots] += price * price
    history[week % h, slots] = price
    s["own_n"][slots] += 1
    s["l2_n"][slots] += 1
    s["l2_sum"][slots] += micro(price)
    lines, units = np.zeros(n, np.uint32), np.zeros(n, np.int64)
    lines[slots], units[slots] = obs.n_lines, obs.units
    window_rows = [(week - k) % h for k in range(cfg.reference_window)]
    own_max = np.fmax.reduce(
        history if len(window_rows) == h else history[window_rows], axis=0
    )  # (N,)
    return own_max, lines, units


def _waterfall(state: CellState, obs: WeekInput):
    """Steps 3-4: observed -> cell's recent mean -> product x region this week -> product
    chain-wide to date, filled from the last level up so each is one masked copy; -> (actual
    price, imputation level, observed price)."""
    s, n, slots, price = state.slot, state.n, obs.slots, obs.price
    product = s["product"]
    with np.errstate(invalid="ignore", divide="ignore"):
        size = state.products.size
        l4 = np.bincount(product, s["price_sum"], size) / np.bincount(product, s["n_obs"], size)
        l2 = s["l2_sum"] / (s["l2_n"] * float(MICRO))  # 0 / 0 = NaN without observations
    l3 = obs.region_mean[s["product_region"]]
    no_l3 = np.isnan(l3)
    actual = np.where(no_l3, l4[product], l3)
    method = np.where(no_l3, np.uint8(3), np.uint8(2))
    has_l2 = ~np.isnan(l2)
    np.copyto(actual, l2, where=has_l2)
    np.copyto(method, np.uint8(1), where=has_l2)
    actual[slots], method[slots] = price, 0
    observed_price = np.full(n, np.nan)
    observed_price[slots] = price
    return actual, method, observed_price


def _reference_prices(state: CellState, obs: WeekInput, actual, own_max):
    """Steps 2-3 of the spec: base price and the promotion reference, and the depths (the
    discount depth only where observed); -> (base, reference, depth, base depth)."""
    cfg, s, slots, price = state.cfg, state.slot, obs.slots, obs.price
    base = np.fmax.reduce(s["prev_price"], axis=0)
    np.fmax(base, actual, out=base)
    zone_max = np.full(state.zones.size, np.nan)
    np.fmax.at(zone_max, s["zone"], own_max)
    reference = np.fmax(own_max, zone_max[s["zone"]])
    np.copyto(reference, own_max, where=s["own_n"] >= cfg.min_own_observations)
    # Where the source records the regular shelf price (D90), it is the promotion reference.
    known = ~np.isnan(obs.regular)
    reference[slots[known]] = obs.regular[known]
    depth = np.zeros(state.n)
    with np.errstate(invalid="ignore", divide="ignore"):
        depth[slots] = np.clip(1.0 - price / reference[slots], 0.0, 1.0)
        base_depth = np.clip(1.0 - actual / base, 0.0, 1.0)
    return base, reference, depth, base_depth


def _checked_columns(state: CellState, week: int, actual, method, base, depth, lines) -> dict:
    """Step 5: business rules, quality, and the running figures every row carries."""
    cfg, s, n = state.cfg, state.slot, state.n
    product = s["product"]
    with np.errstate(invalid="ignore", divide="ignore"):
        count, total = s["n_obs"], s["price_sum"]
        mean = total / count
        cv = np.sqrt(np.maximum((s["price_sumsq"] - count * mean * mean) / (count - 1), 0.0)) / mean
        cv[count < 2] = np.nan
    first_week, obs_weeks = state.product["first_week"], state.product["obs_weeks"]
    missing_share = (1.0 - obs_weeks / (week - first_week + 1))[product]
    rules = {
        "price_nonpositive": actual <= 0,
        "price_over_max": actual >= cfg.max_price,
        "depth_over_max": depth >= cfg.max_depth,
        "base_price_decrease": base < s["prev_base"] - 0.005,
        "low_coverage": missing_share > cfg.max_missing_share,
        "high_volatility": cv > cfg.max_cv,
    }
    flags = np.zeros(n, np.uint8)
    for name, broken in rules.items():
        flags |= broken.view(np.uint8) * np.uint8(VALIDATION_FLAG_BITS[name])
    quality = _BASE_QUALITY[method]
    quality[lines >= 3] = 1.0
    quality -= 0.1 * _POPCOUNT[flags]
    np.clip(quality, 0.0, 1.0, out=quality)
    return {
        "actual_price": actual,
        "quality_score": quality,
        "missing_share": missing_share,
        "price_cv": cv,
        "price_sum_to_date": total.copy(),
        "price_sumsq_to_date": s["price_sumsq"].copy(),
        "validation_flags": flags,
        "method": method,
        "first_week": s["first_week"].copy(),
        "product_first_week": first_week[product],
        "n_obs_to_date": count.copy(),
        "product_obs_weeks": obs_weeks[product],
    }
