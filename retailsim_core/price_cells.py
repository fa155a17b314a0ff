"""Derived prices over slot-aligned NumPy arrays: the engine behind ``derived_prices`` (D49).

A *slot* is a cell's position in the order cells entered the assortment: by first week, then
cell key (product, then store). The assortment to date only grows, so slots never move: every
per-cell statistic is one flat array, week W's cells are slots ``0..N-1``, and a week costs a
few vectorised passes over N plus its own observations — no joins and no group-bys over the
history. Partitions are written in slot order, so partition k's rows are the first rows of
every later partition: that is what :func:`restore` resumes from.

The week's arithmetic is ``price_kernel.py``'s fold (a NumPy reference and a compiled path,
D50); ``prices_reference.py`` computes the same table with Polars joins, the oracle of both.

Dimensions: N cells to date; H = ``cfg.history_weeks`` weeks of observed prices in a ring
(week k at row ``k % H``); P products; Z pricing zones (product x region x format); R product x
region pairs. Arrays hold spare capacity; ``slot[name]`` is the live ``[..., :N]`` view.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from retailsim_core import price_kernel
from retailsim_core.calendar import shop_week_of
from retailsim_core.price_kernel import micro
from retailsim_core.prices import (
    BASE_WINDOW,
    DERIVED_PRICES_SCHEMA,
    FORMAT,
    IMPUTATION_METHODS,
    METHOD,
    REGION,
    STORE_SPAN,
    PriceConfig,
    cell_codes,
    cell_key,
    zone_of,
)
from retailsim_core.slots import Growable, KeyIndex

IDENTITY = pl.Schema(
    {"product_id": pl.String, "store_id": pl.String, "store_region": REGION, "store_format": FORMAT}
)
_METHODS = pl.Series("imputation_method", IMPUTATION_METHODS, METHOD)
_NULL_WHEN_NAN = ("observed_price", "reference_price", "price_cv")


@dataclass
class CellState:
    """Everything week W+1 needs from weeks <= W."""

    cfg: PriceConfig
    week: int = 0  # last week folded in
    cells: KeyIndex = field(default_factory=KeyIndex)  # cell key -> slot
    products: KeyIndex = field(default_factory=KeyIndex)
    zones: KeyIndex = field(default_factory=KeyIndex)
    product_regions: KeyIndex = field(default_factory=KeyIndex)
    slot: Growable = field(default_factory=Growable)  # per-slot arrays
    product: Growable = field(default_factory=Growable)  # per-product arrays
    identity: pl.DataFrame = field(default_factory=IDENTITY.to_frame)  # IDENTITY per slot
    head: int = 0  # prev_price row holding week W's price

    def __post_init__(self) -> None:
        for name, dtype, fill, rows in (
            ("key", np.int64, 0, None),
            ("product", np.int64, 0, None),
            ("zone", np.int64, 0, None),
            ("product_region", np.int64, 0, None),
            ("first_week", np.int16, 0, None),
            ("n_obs", np.int32, 0, None),
            ("price_sum", np.float64, 0.0, None),
            ("price_sumsq", np.float64, 0.0, None),
            ("own_n", np.int32, 0, None),
            ("l2_n", np.int32, 0, None),
            ("l2_sum", np.int64, 0, None),
            ("prev_base", np.float64, np.nan, None),
            (
                "prev_price",
                np.float64,
                np.nan,
                BASE_WINDOW - 1,
            ),  # the cell's price in weeks W, W-1, W-2
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
        cells = cells.with_columns(
            pl.col("store_region").cast(REGION), pl.col("store_format").cast(FORMAT)
        )
        keys = cells["cell"].to_numpy()
        self.cells.add(keys)
        new = slice(self.slot.grow(keys.size), self.n)
        product_num = keys // STORE_SPAN
        # An Enum's physical code is the position in STORE_*_CODES: the REGION_INDEX / FORMAT_INDEX
        # code.
        region = cells["store_region"].to_physical().cast(pl.Int64).to_numpy()
        fmt = cells["store_format"].to_physical().cast(pl.Int64).to_numpy()
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


def advance(
    state: CellState, observed: pl.DataFrame, week: int, fold=price_kernel.fold_week
) -> pl.DataFrame:
    """Fold week W's observed prices (OBSERVED_SCHEMA, one week, sorted by cell) into ``state``
    and return week W's derived prices (DERIVED_PRICES_SCHEMA) in slot order. ``fold`` is one of
    ``price_kernel``'s week folds (default: compiled where available)."""
    if week != state.week + 1:
        raise ValueError(f"price state is at week {state.week}; cannot derive week {week}")
    keys = observed["cell"].to_numpy()
    if (np.diff(keys) <= 0).any():
        raise ValueError("observed prices must hold one week, one row per cell, sorted by cell")
    slots = state.cells.lookup(keys)
    fresh = slots < 0
    state.add_cells(
        observed.filter(pl.Series(fresh)).with_columns(first_week=pl.lit(week, pl.Int16))
    )
    slots[fresh] = state.cells.lookup(keys[fresh])
    price = observed["observed_price"].to_numpy()
    s = state.slot
    first_of_product = np.flatnonzero(
        np.diff(keys // STORE_SPAN, prepend=-1)
    )  # keys ascend by product
    state.product["obs_weeks"][s["product"][slots[first_of_product]]] += 1
    region, size = s["product_region"][slots], state.product_regions.size
    with np.errstate(invalid="ignore", divide="ignore"):
        region_mean = np.bincount(region, price, size) / np.bincount(region, minlength=size)
    new_head = (state.head - 1) % s["prev_price"].shape[
        0
    ]  # the oldest last-price row becomes week W's
    columns = fold(
        state,
        week,
        price_kernel.WeekInput(
            slots=slots,
            price=np.ascontiguousarray(price, np.float64),
            n_lines=np.ascontiguousarray(observed["n_lines"].to_numpy(), np.uint32),
            units=np.ascontiguousarray(observed["units"].to_numpy(), np.int64),
            region_mean=region_mean,
            new_head=new_head,
        ),
    )
    state.head, state.week = new_head, week
    return _table(state, week, columns)


def _table(state: CellState, week: int, columns: dict[str, np.ndarray]) -> pl.DataFrame:
    n, method = state.n, columns.pop("method")
    is_observed = pl.Series(method == 0)
    numeric = pl.DataFrame(columns).with_columns(
        *[pl.col(c).fill_nan(None) for c in _NULL_WHEN_NAN],
        *[pl.when(is_observed).then(pl.col(c)).alias(c) for c in ("n_lines", "units")],
        imputation_method=_METHODS.gather(method.astype(np.uint32)),
        week=pl.repeat(week, n, dtype=pl.Int16),
        shop_week=pl.repeat(shop_week_of(week), n, dtype=pl.Int32),
    )
    return state.identity.hstack(numeric).select(DERIVED_PRICES_SCHEMA.names())


def restore(cfg: PriceConfig, frames: dict[int, pl.DataFrame]) -> CellState:
    """The state after week W = max(frames) from derived_prices partitions W-H+1..W (or 1..W):
    W's running statistics, and the earlier weeks' prices, which are row prefixes of W's."""
    week = max(frames)
    if sorted(frames) != list(range(max(1, week - cfg.history_weeks + 1), week + 1)):
        raise ValueError(
            f"restoring week {week} needs partitions {max(1, week - cfg.history_weeks + 1)}..{week}"
        )
    last = frames[week]
    state = CellState(cfg, week=week)
    state.add_cells(last.select(cell_key(), "first_week", "store_region", "store_format"))
    s, h = state.slot, cfg.history_weeks
    for name, column in (
        ("n_obs", "n_obs_to_date"),
        ("price_sum", "price_sum_to_date"),
        ("price_sumsq", "price_sumsq_to_date"),
        ("prev_base", "base_price"),
    ):
        s[name][:] = last[column].to_numpy()
    state.product["first_week"][s["product"]] = last["product_first_week"].to_numpy()
    state.product["obs_weeks"][s["product"]] = last["product_obs_weeks"].to_numpy()
    for k, frame in frames.items():
        m = frame.height
        if not np.array_equal(frame.select(cell_key()).to_series().to_numpy(), s["key"][:m]):
            raise ValueError(
                f"derived_prices week {k} is not a row prefix of week {week}: "
                "re-materialize derived_prices from week 1"
            )
        if week - k < BASE_WINDOW - 1:
            s["prev_price"][week - k, :m] = frame["actual_price"].to_numpy()
        s["history"][k % h, :m] = frame["observed_price"].fill_null(np.nan).to_numpy()
    for window, count in ((cfg.reference_window, "own_n"), (cfg.store_mean_window, "l2_n")):
        rows = s["history"][[(week - j) % h for j in range(min(window, week))]]
        s[count][:] = (~np.isnan(rows)).sum(axis=0)
        if count == "l2_n":
            s["l2_sum"][:] = np.where(np.isnan(rows), 0, micro(np.nan_to_num(rows))).sum(axis=0)
    return state
