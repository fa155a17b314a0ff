"""Derived prices over slot-aligned NumPy arrays: the engine behind ``derived_prices`` (D49).

A *slot* is a cell's position in the order cells entered the assortment: by first week, then
cell key (product, then store). The assortment to date only grows, so slots never move: every
per-cell statistic is one flat array, week W's cells are slots ``0..N-1``, and a week costs a
few vectorised passes over N plus its own observations — no joins and no group-bys over the
history. A week's dense table is in slot order, so week k's rows are the first rows of every
later week's: what the price features align on (D96). ``carried.replay`` rebuilds the state
from the stored observed cells.

The state carried from week to week is ``state.CellState``; the week's arithmetic is the week
fold (the NumPy reference ``fold.py`` and its compiled path ``kernel.py``, D50); ``reference.py``
computes the same table with Polars joins, the oracle of both.

Dimensions: N cells to date; H = ``cfg.history_weeks`` weeks of observed prices in a ring
(week k at row ``k % H``); P products; Z pricing zones (product x region x format); R product x
region pairs. Arrays hold spare capacity; ``slot[name]`` is the live ``[..., :N]`` view.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from retailsim_core.calendar import shop_week_of
from retailsim_core.derived_prices import (
    DERIVED_PRICES_SCHEMA,
    IMPUTATION_METHODS,
    METHOD,
    STORE_SPAN,
)
from retailsim_core.derived_prices import kernel as price_kernel
from retailsim_core.derived_prices.fold import WeekInput
from retailsim_core.derived_prices.state import CellState

_METHODS = pl.Series("imputation_method", IMPUTATION_METHODS, METHOD)
_NULL_WHEN_NAN = ("observed_price", "regular_price", "reference_price", "price_cv")


def advance(
    state: CellState,
    observed: pl.DataFrame,
    week: int,
    fold=price_kernel.fold_week,
    table: bool = True,
) -> pl.DataFrame | None:
    """Fold week W's observed prices (OBSERVED_SCHEMA, one week, sorted by cell) into ``state``
    and return week W's derived prices (DERIVED_PRICES_SCHEMA) in slot order (None without
    ``table``: a replay that only moves the state on). ``fold`` is one of ``price_kernel``'s
    week folds (default: compiled where available)."""
    columns = _fold(state, observed, week, fold, table)
    return _table(state, week, columns) if table else None


def advance_observed(
    state: CellState, observed: pl.DataFrame, week: int, fold=price_kernel.fold_week
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`advance`, returning what ``derived_prices`` keeps of week W's dense table without
    building it: its observed rows (the same rows, in slot order, the same bytes) and its
    SUMMARY_COLUMNS (every cell). An observed week is a few percent of the cells to date: on
    the real sample the dense tables were 69M rows for 2.8M kept (D104)."""
    columns = _fold(state, observed, week, fold)
    summary = pl.DataFrame(
        {
            "imputation_method": _METHODS.gather(columns["method"].astype(np.uint32)),
            **{name: columns[name] for name in SUMMARY_COLUMNS[1:]},
        }
    )
    return _table(state, week, columns, rows=np.flatnonzero(columns["method"] == 0)), summary


# The dense table's columns a week's summary reads (``pipeline.price_weeks.summarise``).
SUMMARY_COLUMNS = (
    "imputation_method",
    "promo_flag",
    "discount_depth",
    "actual_price",
    "validation_flags",
)


def _fold(
    state: CellState, observed: pl.DataFrame, week: int, fold, table: bool = True
) -> dict[str, np.ndarray]:
    """The week's columns over every cell to date (slot order); the state moves to ``week``.
    Without ``table`` (a replay) the regular prices by slot, which only a table shows, are
    left out."""
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
    regular = observed["regular_price"].fill_null(np.nan).to_numpy()
    columns = fold(
        state,
        week,
        WeekInput(
            slots=slots,
            price=np.ascontiguousarray(price, np.float64),
            n_lines=np.ascontiguousarray(observed["n_lines"].to_numpy(), np.uint32),
            units=np.ascontiguousarray(observed["units"].to_numpy(), np.int64),
            regular=np.ascontiguousarray(regular, np.float64),
            region_mean=region_mean,
            new_head=new_head,
        ),
    )
    state.head, state.week = new_head, week
    if table:
        columns["regular_price"] = np.full(state.n, np.nan)
        columns["regular_price"][slots] = regular
    return columns


def _table(
    state: CellState, week: int, columns: dict[str, np.ndarray], rows: np.ndarray | None = None
) -> pl.DataFrame:
    """The week's table from its columns: every cell, or the cells at slots ``rows``."""
    identity = state.identity
    if rows is not None:
        columns = {name: column[rows] for name, column in columns.items()}
        identity = identity[rows]
    else:
        columns = dict(columns)  # the caller's stay whole
    n, method = len(columns["method"]), columns.pop("method")
    is_observed = pl.Series(method == 0)
    numeric = pl.DataFrame(columns).with_columns(
        *[pl.col(c).fill_nan(None) for c in _NULL_WHEN_NAN],
        *[pl.when(is_observed).then(pl.col(c)).alias(c) for c in ("n_lines", "units")],
        imputation_method=_METHODS.gather(method.astype(np.uint32)),
        week=pl.repeat(week, n, dtype=pl.Int16),
        shop_week=pl.repeat(shop_week_of(week), n, dtype=pl.Int32),
    )
    return identity.hstack(numeric).select(DERIVED_PRICES_SCHEMA.names())
