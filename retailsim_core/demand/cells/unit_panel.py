"""The unit panel a demand forecast is scored on (issue #61).

Every product × store cell that sold before the forecast weeks, every week from its first sale
to the last week, with the units every shopper of the source bought there (zero where nobody
did; carded or not) and the week's promotion plan (display, mailer: known before the week).
A cell enters the panel at its first sale: its rows grow with what was observed, not with
every product × store × week.

Glossary: C cells (product × store that sold before the forecast weeks), W weeks.
"""

from __future__ import annotations

import polars as pl

CELL = ("product_id", "store_id")
KEY = (*CELL, "week")
PANEL_SCHEMA = pl.Schema(
    {
        "product_id": pl.String,
        "store_id": pl.String,
        "week": pl.Int16,
        "units": pl.Float64,  # quantity bought by every shopper of the source in the cell-week
        "display": pl.Boolean,  # on display that week (the source's plan; False where none)
        "mailer": pl.Boolean,  # in that week's mailer
    }
)


def weekly_units(raw: pl.LazyFrame) -> pl.LazyFrame:
    """product_id, store_id, week, units: the quantity of ``raw_transactions`` lines summed per
    cell and week (every kept line: carded shoppers or not)."""
    return raw.group_by(KEY).agg(units=pl.col("quantity").sum().cast(pl.Float64))


def unit_panel(
    units: pl.LazyFrame, plan: pl.LazyFrame, *, first_forecast_week: int, last_week: int
) -> pl.LazyFrame:
    """(C × weeks since each cell's first sale) rows in PANEL_SCHEMA, sorted by cell and week:
    the cells of ``units`` (``weekly_units``) with a sale before ``first_forecast_week``, from
    that first sale through ``last_week``; ``plan``: the promotion cells (week, product_id,
    store_id, display, mailer)."""
    cells = (
        units.filter((pl.col("week") < first_forecast_week) & (pl.col("units") > 0))
        .group_by(CELL)
        .agg(first=pl.col("week").min())
    )
    weeks = pl.int_ranges("first", last_week + 1, dtype=pl.Int16)
    grid = cells.select(*CELL, week=weeks).explode("week", empty_as_null=False)
    flags = plan.select(*KEY, "display", "mailer").with_columns(pl.col("week").cast(pl.Int16))
    return (
        grid.join(units.with_columns(pl.col("week").cast(pl.Int16)), on=KEY, how="left")
        .join(flags, on=KEY, how="left")
        .with_columns(
            pl.col("units").fill_null(0.0),
            pl.col("display").fill_null(False),
            pl.col("mailer").fill_null(False),
        )
        .select(PANEL_SCHEMA.names())
        .cast(dict(PANEL_SCHEMA))
        .sort(KEY)
    )


def promotion_kind() -> pl.Expr:
    """ "display+mailer", "display", "mailer" or "none": how the plan promoted the cell-week."""
    display, mailer = pl.col("display"), pl.col("mailer")
    return (
        pl.when(display & mailer)
        .then(pl.lit("display+mailer"))
        .when(display)
        .then(pl.lit("display"))
        .when(mailer)
        .then(pl.lit("mailer"))
        .otherwise(pl.lit("none"))
        .alias("promotion")
    )


def padded_panel(panel: pl.LazyFrame, *, start_week: int, last_week: int) -> pl.LazyFrame:
    """Every cell of ``panel`` on every week from ``start_week`` to ``last_week``, numbered
    (``cell``: UInt32) and sorted by cell and week; ``sold_before``: the cell had sold in an
    earlier week (the condition every forecast row of the check meets, so the rows a model fits
    on meet it too: the week of a cell's first sale is the sale that made it a cell, and fitted
    on, it would teach a model that cells sell more than they go on to). Weeks before a cell's
    first sale hold zero units and no promotion, as the lags of the
    seasonal-naive forecast read them (``baselines``), weeks before the source's first (< 1)
    included: a lag reaching before the data reads a zero."""
    cells = panel.group_by(CELL).agg(first=pl.col("week").min()).sort(*CELL).with_row_index("cell")
    weeks = pl.LazyFrame({"week": range(start_week, last_week + 1)})
    return (
        cells.join(weeks.with_columns(pl.col("week").cast(pl.Int16)), how="cross")
        .join(panel, on=KEY, how="left")
        .with_columns(
            pl.col("units").fill_null(0.0),
            pl.col("display").fill_null(False),
            pl.col("mailer").fill_null(False),
            sold_before=pl.col("week") > pl.col("first"),
        )
        .drop("first")
        .sort("cell", "week")
    )
