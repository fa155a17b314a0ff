"""Forecasts of a cell's units for week W from its units before W only (issue #61): the
seasonal-naive forecast every MASE is scaled by, and moving averages.

Every forecast reads the panel's earlier rows of the same cell (``shift`` over a cell's rows
sorted by week, which the panel guarantees contiguous from its first sale): a cell-week before
the cell's first sale is a zero it never had a chance to show, so a lag that reaches before the
panel is 0, as the cell's units were.
"""

from __future__ import annotations

import polars as pl

from retailsim_core.demand.cells.unit_panel import CELL


def lagged(units: str, lag: int) -> pl.Expr:
    """The cell's ``units`` ``lag`` weeks before (0 before its first sale)."""
    return pl.col(units).shift(lag).over(CELL).fill_null(0.0)


def seasonal_naive(lf: pl.LazyFrame, *, season: int) -> pl.LazyFrame:
    """``lf`` with ``seasonal_naive``: the cell's units ``season`` weeks before (52 where the
    data holds a year before the forecast weeks, else 1: the last week's)."""
    return lf.with_columns(lagged("units", season).alias("seasonal_naive"))


def moving_average(lf: pl.LazyFrame, *, window: int) -> pl.LazyFrame:
    """``lf`` with ``moving_average_<window>``: the mean of the cell's last ``window`` weeks
    before W (fewer at the start of a cell's rows: its first weeks)."""
    before = pl.col("units").shift(1).rolling_mean(window, min_samples=1)
    mean = before.over(CELL).fill_null(0.0)
    return lf.with_columns(mean.alias(f"moving_average_{window}"))


def season_of(first_forecast_week: int) -> int:
    """The seasonal-naive lag: a year (52 weeks) where every forecast week has one before it
    inside the data, else the week before (The Complete Journey holds one year)."""
    return 52 if first_forecast_week > 52 else 1
