"""Carried-state shelf prices (D96): store what was observed, materialise a week when it is read.

The dense table of week W (every cell of every store's assortment to date) is a function of the
observations of weeks <= W alone: the week fold's state after W is built from them and nothing
else (D49). So ``derived_prices`` stores, per week, only its observed cells — their rows are
exactly the dense table's rows for those cells, with the source's regular price, the one input
of the fold a row would not otherwise keep — and a reader gets any week's dense table by
replaying the fold over the stored rows from week 1. The replay costs a few vectorised passes
over the cells per week and builds a table only for the weeks asked for; storage and writes
grow with what was observed (2.83M rows on the real LGSR sample instead of 68.6M).

Glossary: a *stored row* is a ``DERIVED_PRICES_SCHEMA`` row of an observed cell; the *dense
table* of a week is what :func:`cells.advance` returns for it (slot order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import polars as pl

from retailsim_core.derived_prices import (
    IMPUTATION_METHODS,
    OBSERVED_SCHEMA,
    PriceConfig,
    cell_key,
)
from retailsim_core.derived_prices.cells import advance
from retailsim_core.derived_prices.state import CellState

OBSERVED = IMPUTATION_METHODS[0]  # "observed": the imputation_method of a stored row


def stored_rows(table: pl.DataFrame) -> pl.DataFrame:
    """The rows of a dense week table that ``derived_prices`` keeps: its observed cells."""
    return table.filter(pl.col("imputation_method") == OBSERVED)


def observations(stored: pl.DataFrame) -> pl.DataFrame:
    """The week fold's input (``OBSERVED_SCHEMA``, sorted by cell) back from a week's stored
    rows: the inverse of what the fold made of ``prices.observed_prices``."""
    return (
        stored.select(
            cell_key(),
            "week",
            pl.col("store_region").cast(pl.String),
            pl.col("store_format").cast(pl.String),
            "observed_price",
            "regular_price",
            "n_lines",
            pl.col("units").cast(pl.Int64),
        )
        .cast(dict(OBSERVED_SCHEMA))
        .sort("cell")
    )


def replay(
    read_week: Callable[[int], pl.DataFrame],
    weeks: Iterable[int],
    cfg: PriceConfig = PriceConfig(),
    state: CellState | None = None,
) -> Iterator[tuple[int, pl.DataFrame]]:
    """Dense tables of ``weeks`` (ascending), each as ``advance`` returned it when the week was
    derived. ``read_week(k)`` gives week k's stored rows; every week from the state's next one
    (week 1 for a new state) to the last asked for is folded, and only the asked-for weeks get
    a table. ``state`` (consumed) lets a caller continue a replay it already ran."""
    wanted = sorted(set(weeks))
    state = state if state is not None else CellState(cfg)
    if wanted and wanted[0] <= state.week:
        raise ValueError(f"the price state is past week {wanted[0]}: replay from a fresh state")
    asked = set(wanted)
    for week in range(state.week + 1, (wanted[-1] if wanted else state.week) + 1):
        table = advance(state, observations(read_week(week)), week, table=week in asked)
        if table is not None:
            yield week, table


def replay_state(
    read_week: Callable[[int], pl.DataFrame], through: int, cfg: PriceConfig = PriceConfig()
) -> CellState:
    """The fold's state after week ``through`` (weeks 1..through replayed, no table built)."""
    state = CellState(cfg)
    for week in range(1, through + 1):
        advance(state, observations(read_week(week)), week, table=False)
    return state
