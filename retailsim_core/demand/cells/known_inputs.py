"""What a forecaster knows about week W before it starts, beside the cell's own past units
(issue #61): the promotion plan, the calendar and the product's last price.

- ``display``, ``mailer``: the plan for the cell-week (set before the week: the panel's flags);
- ``week_sin``, ``week_cos``: the week's place in the year (its Monday), cyclic so that a week
  of the year never trained on still sits between weeks that were;
- ``holidays``: the calendar's public holidays falling in the week;
- ``price_index``: the product's chain-wide unit price in the latest week before W in which it
  sold, over its typical price before the forecast weeks (1 before its first sale or where the
  product has no price before the forecast weeks). Week W's own paid
  price is never read: it exists only where the cell sold, so it would tell the forecast that a
  sale happened.

Glossary: R panel rows, P products.
"""

from __future__ import annotations

import datetime as dt
import math

import polars as pl

from retailsim_core.calendar import SourceCalendar


def cents() -> pl.Expr:
    """``spend`` in whole cents: sums of integers do not depend on the order a parallel
    group-by adds them in, so the same data gives the same prices to the last bit."""
    return (pl.col("spend") * 100).round().cast(pl.Int64)


EXOGENOUS = ("display", "mailer", "week_sin", "week_cos", "holidays", "price_index")


def calendar_frame(calendar: SourceCalendar, weeks: range) -> pl.LazyFrame:
    """week, week_sin, week_cos, holidays for ``weeks`` of ``calendar`` (a week before the
    source's first is dated by the same weekly step: the lags of the first weeks read it)."""
    holidays = calendar.holiday_dates
    rows = []
    for week in weeks:
        monday = calendar.first_monday + dt.timedelta(weeks=week - 1)
        angle = 2 * math.pi * (monday.timetuple().tm_yday - 1) / 365.25
        end = monday + dt.timedelta(days=7)
        rows.append(
            (week, math.sin(angle), math.cos(angle), sum(monday <= d < end for d in holidays))
        )
    schema = {"week": pl.Int16, "week_sin": pl.Float64, "week_cos": pl.Float64,
              "holidays": pl.Int8}  # fmt: skip
    return pl.DataFrame(rows, schema=schema, orient="row").lazy()


def last_price_index(raw: pl.LazyFrame, *, first_forecast_week: int) -> pl.LazyFrame:
    """product_id, week, price_index: for each (product, week) the product sold in, its
    chain-wide unit price (spend over quantity) over its median weekly unit price of the weeks
    before the forecast weeks (``raw``: product_id, week, quantity, spend); the index a forecast
    of a LATER week reads (``with_exogenous``). Every source records spend; not every source
    records a regular price, so the reference is the product's own typical price."""
    weekly = (
        raw.filter(pl.col("quantity") > 0)
        .group_by("product_id", "week")
        .agg(unit_price=cents().sum() / 100 / pl.col("quantity").sum())
    )
    reference = (
        weekly.filter(pl.col("week") < first_forecast_week)
        .group_by("product_id")
        .agg(typical=pl.col("unit_price").median())
    )
    return weekly.join(reference, on="product_id").select(
        "product_id",
        pl.col("week").cast(pl.Int16),
        price_index=(pl.col("unit_price") / pl.col("typical")).clip(0.0, 3.0).fill_nan(1.0),
    )


def with_exogenous(
    panel: pl.LazyFrame,
    raw: pl.LazyFrame,
    calendar: SourceCalendar,
    *,
    first_week: int,
    first_forecast_week: int,
    last_week: int,
) -> pl.LazyFrame:
    """``panel`` (weeks ``first_week``..``last_week``) with the EXOGENOUS columns; every value
    of a row of week W is known before W (the plan, the calendar, prices of weeks < W)."""
    # a week's ratio is known from the next week on: the as-of join reads weeks < W only
    known = (
        last_price_index(raw, first_forecast_week=first_forecast_week)
        .with_columns(pl.col("week") + 1)
        .sort("week")
    )
    return (
        panel.sort("week")
        .join_asof(  # both sides sorted by week above (polars cannot check it within groups)
            known, on="week", by="product_id", strategy="backward", check_sortedness=False
        )
        .with_columns(pl.col("price_index").fill_null(1.0))
        .join(calendar_frame(calendar, range(first_week, last_week + 1)), on="week", how="left")
        .sort("product_id", "store_id", "week")
    )
