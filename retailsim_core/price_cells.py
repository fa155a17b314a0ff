"""Derived prices over slot-aligned NumPy arrays: the engine behind ``derived_prices`` (D49).

A *slot* is a cell's position in the order cells entered the assortment: by first week, then
cell key (product, then store). The assortment to date only grows, so slots never move: every
per-cell statistic is one flat array, week W's cells are slots ``0..N-1``, and a week costs a
few vectorised passes over N plus its own observations — no joins and no group-bys over the
history. Partitions are written in slot order, so partition k's rows are the first rows of
every later partition: that is what :func:`restore` resumes from.

``prices_reference.py`` computes the same table with Polars joins; the oracle test compares them.

Dimensions: N cells to date; H = ``cfg.history_weeks`` weeks of observed prices in a ring
(week k at row ``k % H``); P products; Z pricing zones (product x region x format); R product x
region pairs. Arrays hold spare capacity; ``slot[name]`` is the live ``[..., :N]`` view.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from retailsim_core.calendar import shop_week_of
from retailsim_core.prices import (
    BASE_WINDOW, DERIVED_PRICES_SCHEMA, FORMAT_INDEX, IMPUTATION_METHODS, REGION_INDEX, STORE_SPAN,
    VALIDATION_FLAG_BITS, PriceConfig, cell_codes, cell_key, zone_of,
)
from retailsim_core.slots import Growable, KeyIndex

IDENTITY = pl.Schema({"product_id": pl.String, "store_id": pl.String, "store_region": pl.String,
                      "store_format": pl.String})
MICRO = 1_000_000  # level-2 sums in integer millionths: exact in any order, so a resumed run matches
_BASE_QUALITY = np.array([0.85, 0.6, 0.45, 0.3])  # by imputation method; observed with >= 3 lines: 1.0
_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], np.float64)  # broken rules per flag byte
_METHODS = pl.Series("imputation_method", IMPUTATION_METHODS, pl.String)
_NULL_WHEN_NAN = ("observed_price", "reference_price", "price_cv", "prev_base_price")


def _micro(prices: np.ndarray) -> np.ndarray:
    return np.rint(prices * MICRO).astype(np.int64)


@dataclass
class CellState:
    """Everything week W+1 needs from weeks <= W."""

    cfg: PriceConfig
    week: int = 0                                        # last week folded in
    cells: KeyIndex = field(default_factory=KeyIndex)    # cell key -> slot
    products: KeyIndex = field(default_factory=KeyIndex)
    zones: KeyIndex = field(default_factory=KeyIndex)
    product_regions: KeyIndex = field(default_factory=KeyIndex)
    slot: Growable = field(default_factory=Growable)     # per-slot arrays
    product: Growable = field(default_factory=Growable)  # per-product arrays
    identity: pl.DataFrame = field(default_factory=IDENTITY.to_frame)  # IDENTITY per slot
    head: int = 0                                        # prev_price row holding week W's price

    def __post_init__(self) -> None:
        for name, dtype, fill, rows in (
            ("key", np.int64, 0, None), ("product", np.int64, 0, None), ("zone", np.int64, 0, None), ("product_region", np.int64, 0, None),
            ("first_week", np.int16, 0, None), ("n_obs", np.int32, 0, None),
            ("price_sum", np.float64, 0.0, None), ("price_sumsq", np.float64, 0.0, None),
            ("own_n", np.int16, 0, None), ("l2_n", np.int16, 0, None), ("l2_sum", np.int64, 0, None),
            ("prev_base", np.float64, np.nan, None),
            ("prev_price", np.float64, np.nan, BASE_WINDOW - 1),   # the cell's price in weeks W, W-1, W-2
            ("history", np.float64, np.nan, self.cfg.history_weeks),
        ):
            self.slot.declare(name, dtype, fill, rows)
        self.product.declare("first_week", np.int16, np.iinfo(np.int16).max)
        self.product.declare("obs_weeks", np.int32, 0)

    @property
    def n(self) -> int:
        return self.slot.size

    def add_cells(self, cells: pl.DataFrame) -> None:
        """Append cells in the given order: columns cell, first_week and IDENTITY's store codes."""
        if cells.height == 0:
            return
        keys = cells["cell"].to_numpy()
        self.cells.add(keys)
        new = slice(self.slot.grow(keys.size), self.n)
        product_num = keys // STORE_SPAN
        region = cells["store_region"].replace_strict(REGION_INDEX, return_dtype=pl.Int64).to_numpy()
        fmt = cells["store_format"].replace_strict(FORMAT_INDEX, return_dtype=pl.Int64).to_numpy()
        product = self.products.ids(product_num)
        self.product.grow(self.products.size - self.product.size)
        first_week = cells["first_week"].to_numpy()
        s = self.slot.arrays
        s["key"][new], s["product"][new], s["first_week"][new] = keys, product, first_week
        s["zone"][new] = self.zones.ids(zone_of(product_num, region, fmt))
        s["product_region"][new] = self.product_regions.ids(product_num * 16 + region)
        np.minimum.at(self.product.arrays["first_week"], product, first_week)
        identity = cells.with_columns(cell_codes()).select(IDENTITY.names())
        self.identity = pl.concat([self.identity, identity], rechunk=self.identity.n_chunks() > 16)


def advance(state: CellState, observed: pl.DataFrame, week: int) -> pl.DataFrame:
    """Fold week W's observed prices (OBSERVED_SCHEMA, one week, sorted by cell) into ``state``
    and return week W's derived prices (DERIVED_PRICES_SCHEMA) in slot order."""
    cfg, h = state.cfg, state.cfg.history_weeks
    if week != state.week + 1:
        raise ValueError(f"price state is at week {state.week}; cannot derive week {week}")
    keys = observed["cell"].to_numpy()
    if (np.diff(keys) <= 0).any():
        raise ValueError("observed prices must hold one week, one row per cell, sorted by cell")
    slots = state.cells.lookup(keys)
    fresh = slots < 0
    state.add_cells(observed.filter(pl.Series(fresh)).with_columns(first_week=pl.lit(week, pl.Int16)))
    slots[fresh] = state.cells.lookup(keys[fresh])
    price = observed["observed_price"].to_numpy()
    n_lines = observed["n_lines"].to_numpy()
    n, s = state.n, state.slot

    # Running statistics (weeks <= W).
    s["n_obs"][slots] += 1
    s["price_sum"][slots] += price
    s["price_sumsq"][slots] += price * price
    first_of_product = np.flatnonzero(np.diff(keys // STORE_SPAN, prepend=-1))  # keys ascend by product
    state.product["obs_weeks"][s["product"][slots[first_of_product]]] += 1

    # The observed-price ring: week W replaces week W-H; the windows' counts and level-2 sums
    # lose the week that leaves them and gain this one.
    history = s["history"]
    for window, count in ((cfg.reference_window, "own_n"), (cfg.store_mean_window, "l2_n")):
        leaving = history[(week - window) % h]
        gone = ~np.isnan(leaving)
        counts = s[count]   # a view: subtract in place
        counts -= gone
        if count == "l2_n":
            s["l2_sum"][gone] -= _micro(leaving[gone])
    history[week % h] = np.nan
    history[week % h, slots] = price
    s["own_n"][slots] += 1
    s["l2_n"][slots] += 1
    s["l2_sum"][slots] += _micro(price)
    window_rows = [(week - k) % h for k in range(cfg.reference_window)]
    own_max = np.fmax.reduce(history if len(window_rows) == h else history[window_rows], axis=0)  # (N,)

    # Step 4, the waterfall: observed -> cell's recent mean -> product x region this week ->
    # product chain-wide to date. Filled from the last level up so each is one masked copy.
    product = s["product"]
    with np.errstate(invalid="ignore", divide="ignore"):
        region = s["product_region"][slots]
        size = state.product_regions.size
        l3 = (np.bincount(region, price, size) / np.bincount(region, minlength=size))[s["product_region"]]
        size = state.products.size
        l4 = np.bincount(product, s["price_sum"], size) / np.bincount(product, s["n_obs"], size)
        l2 = s["l2_sum"] / (s["l2_n"] * float(MICRO))   # 0 / 0 = NaN without observations
    no_l3 = np.isnan(l3)
    actual = np.where(no_l3, l4[product], l3)
    method = np.where(no_l3, np.int8(3), np.int8(2))
    has_l2 = ~np.isnan(l2)
    np.copyto(actual, l2, where=has_l2)
    np.copyto(method, np.int8(1), where=has_l2)
    actual[slots], method[slots] = price, 0
    observed_price = np.full(n, np.nan)
    observed_price[slots] = price

    # Steps 2-3: spec base price and the promotion reference (depth only where observed).
    base = np.fmax.reduce(s["prev_price"], axis=0)
    np.fmax(base, actual, out=base)
    zone_max = np.full(state.zones.size, np.nan)
    np.fmax.at(zone_max, s["zone"], own_max)
    reference = np.fmax(own_max, zone_max[s["zone"]])
    np.copyto(reference, own_max, where=s["own_n"] >= cfg.min_own_observations)
    depth = np.zeros(n)
    with np.errstate(invalid="ignore", divide="ignore"):
        depth[slots] = np.clip(1.0 - price / reference[slots], 0.0, 1.0)
        base_depth = np.clip(1.0 - actual / base, 0.0, 1.0)

        # Step 5: business rules and quality.
        count, total = s["n_obs"], s["price_sum"]
        mean = total / count
        cv = np.sqrt(np.maximum((s["price_sumsq"] - count * mean * mean) / (count - 1), 0.0)) / mean
        cv[count < 2] = np.nan
    first_week, obs_weeks = state.product["first_week"], state.product["obs_weeks"]
    missing_share = (1.0 - obs_weeks / (week - first_week + 1))[product]
    rules = {
        "price_nonpositive": actual <= 0, "price_over_max": actual >= cfg.max_price,
        "depth_over_max": depth >= cfg.max_depth, "base_price_decrease": base < s["prev_base"] - 0.005,
        "low_coverage": missing_share > cfg.max_missing_share, "high_volatility": cv > cfg.max_cv,
    }
    flags = np.zeros(n, np.uint8)
    for name, broken in rules.items():
        flags |= broken.view(np.uint8) * np.uint8(VALIDATION_FLAG_BITS[name])
    lines = np.zeros(n, np.uint32)
    lines[slots] = n_lines
    units = np.zeros(n, np.int64)
    units[slots] = observed["units"].to_numpy()
    is_observed = method == 0
    quality = _BASE_QUALITY[method]
    quality[slots[n_lines >= 3]] = 1.0
    quality -= 0.1 * _POPCOUNT[flags]
    np.clip(quality, 0.0, 1.0, out=quality)

    table = _table(state, week, {
        "actual_price": actual, "base_price": base, "reference_price": reference, "discount_depth": depth,
        "base_discount_depth": base_depth, "promo_flag": depth > cfg.promo_threshold, "quality_score": quality,
        "validation_flags": flags, "observed_price": observed_price, "n_lines": lines, "units": units,
        "first_week": s["first_week"].copy(), "n_obs_to_date": count.copy(), "price_sum_to_date": total.copy(),
        "price_sumsq_to_date": s["price_sumsq"].copy(), "product_first_week": first_week[product],
        "product_obs_weeks": obs_weeks[product], "missing_share": missing_share, "price_cv": cv,
        "prev_base_price": s["prev_base"].copy(),
    }, method, is_observed)
    state.head = (state.head - 1) % s["prev_price"].shape[0]  # the oldest row becomes week W's
    s["prev_price"][state.head] = actual
    s["prev_base"][:] = base
    state.week = week
    return table


def _table(state: CellState, week: int, columns: dict[str, np.ndarray], method: np.ndarray,
           is_observed: np.ndarray) -> pl.DataFrame:
    n = state.n
    numeric = pl.DataFrame(columns).with_columns(
        *[pl.col(c).fill_nan(None) for c in _NULL_WHEN_NAN],
        *[pl.when(pl.Series(is_observed)).then(pl.col(c)).alias(c) for c in ("n_lines", "units")],
        imputation_method=_METHODS.gather(method.astype(np.uint32)),
        week=pl.repeat(week, n, dtype=pl.Int16), shop_week=pl.repeat(shop_week_of(week), n, dtype=pl.Int32))
    return state.identity.hstack(numeric).select(DERIVED_PRICES_SCHEMA.names())


def restore(cfg: PriceConfig, frames: dict[int, pl.DataFrame]) -> CellState:
    """The state after week W = max(frames) from derived_prices partitions W-H+1..W (or 1..W):
    W's running statistics, and the earlier weeks' prices, which are row prefixes of W's."""
    week = max(frames)
    if sorted(frames) != list(range(max(1, week - cfg.history_weeks + 1), week + 1)):
        raise ValueError(f"restoring week {week} needs partitions {max(1, week - cfg.history_weeks + 1)}..{week}")
    last = frames[week]
    state = CellState(cfg, week=week)
    state.add_cells(last.select(cell_key(), "first_week", "store_region", "store_format"))
    s, h = state.slot, cfg.history_weeks
    for name, column in (("n_obs", "n_obs_to_date"), ("price_sum", "price_sum_to_date"),
                         ("price_sumsq", "price_sumsq_to_date"), ("prev_base", "base_price")):
        s[name][:] = last[column].to_numpy()
    state.product["first_week"][s["product"]] = last["product_first_week"].to_numpy()
    state.product["obs_weeks"][s["product"]] = last["product_obs_weeks"].to_numpy()
    for k, frame in frames.items():
        m = frame.height
        if not np.array_equal(frame.select(cell_key()).to_series().to_numpy(), s["key"][:m]):
            raise ValueError(f"derived_prices week {k} is not a row prefix of week {week}: "
                             "re-materialize derived_prices from week 1")
        if week - k < BASE_WINDOW - 1:
            s["prev_price"][week - k, :m] = frame["actual_price"].to_numpy()
        s["history"][k % h, :m] = frame["observed_price"].fill_null(np.nan).to_numpy()
    for window, count in ((cfg.reference_window, "own_n"), (cfg.store_mean_window, "l2_n")):
        rows = s["history"][[(week - j) % h for j in range(min(window, week))]]
        s[count][:] = (~np.isnan(rows)).sum(axis=0)
        if count == "l2_n":
            s["l2_sum"][:] = np.where(np.isnan(rows), 0, _micro(np.nan_to_num(rows))).sum(axis=0)
    return state
