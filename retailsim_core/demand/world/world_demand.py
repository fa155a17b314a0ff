"""The world model's unit forecast (issue #61; design §6.2: "Sales_i = sum of quantity_i across
predicted baskets"). For a cell (product p, store s) in week W, made before W:

    units = c · sum over known customers of E[trips in W] · share(s) · P(basket holds p) · E[q]

- E[trips]: ``trip_forecast``'s visit probability × the customer's trips per visited week
  (weeks < W);
- share(s): ``trip_forecast``'s store shares (decayed store counts of weeks < W);
- P(basket holds p): the world model on a context made before W (``shopper_units``): the
  customer's trips of weeks < W, the store's shelf of week W (the plan's promotions included),
  the weekday and hour of their last trip before the forecast weeks;
- E[q]: the product's mean units per line before the forecast weeks, the units beyond the first
  scaled by the quantity model's display and mailer effects where the week's plan has them and
  by its stock-up effect of the cell's discount on the week's shelf;
- c: one calibration factor, the units every shopper bought in the last week before the
  forecast weeks over the model's units for that week's trips of known customers (what known
  customers' modelled baskets miss: shoppers without a card, new ones, the size head's bias).

The median forecast: WAPE is an absolute error, minimised by the median of the forecast
distribution, not its mean (D116). The buyers of a cell are a sum of many rare independent
draws, so Poisson with the forecast mean; the median forecast is that Poisson's median times
the median units of a line (``median_units``).

Glossary: C contexts (customer × store × week), V vocabulary.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
from scipy.stats import poisson

CONTEXT_COLUMNS = ("customer_id", "store_id", "date", "hour")  # serving's CONTEXT_SCHEMA


def forecast_contexts(
    expected: pl.LazyFrame,
    shares: pl.LazyFrame,
    trips: pl.LazyFrame,
    *,
    first_forecast_week: int,
    first_monday: dt.date,
) -> pl.LazyFrame:
    """customer_id, store_id, week, date, hour, weight (expected trips at that store): one row
    per forecast customer-week and store. ``expected``: customer_id, week, expected_trips;
    ``shares``: customer_id, week, store_id, share; ``trips``: customer_id, week, shop_date,
    shop_hour. The date is the week's day of the customer's last trip before the forecast weeks,
    the hour that trip's."""
    last = (
        trips.filter(pl.col("week") < first_forecast_week)
        .sort("customer_id", "shop_date", "shop_hour")
        .group_by("customer_id")
        .agg(day=pl.col("shop_date").last().dt.weekday() - 1, hour=pl.col("shop_hour").last())
    )
    monday = pl.lit(first_monday) + pl.duration(weeks=pl.col("week").cast(pl.Int64) - 1)
    return (
        expected.select("customer_id", "week", "expected_trips")
        .join(shares, on=["customer_id", "week"])
        .join(last, on="customer_id")
        .select(
            "customer_id",
            "store_id",
            pl.col("week").cast(pl.Int64),
            date=(monday + pl.duration(days=pl.col("day"))).cast(pl.Date),
            hour=pl.col("hour").cast(pl.Int64),
            weight=pl.col("expected_trips") * pl.col("share"),
        )
        .filter(pl.col("weight") > 0)
        .sort("week", "customer_id", "store_id")
    )


def realized_contexts(trips: pl.LazyFrame, week: int) -> pl.LazyFrame:
    """The trips of ``week`` by customers with a trip before it, as contexts of weight 1 (the
    calibration week's: its trips happened before the forecast weeks)."""
    known = trips.filter(pl.col("week") < week).select("customer_id").unique()
    return (
        trips.filter(pl.col("week") == week)
        .join(known, on="customer_id", how="semi")
        .select(
            "customer_id",
            "store_id",
            pl.col("week").cast(pl.Int64),
            date=pl.col("shop_date"),
            hour=pl.col("shop_hour").cast(pl.Int64),
            weight=pl.lit(1.0),
        )
        .sort("week", "customer_id", "store_id", "date", "hour")
    )


def line_quantities(raw: pl.LazyFrame, *, first_forecast_week: int) -> pl.LazyFrame:
    """product_id, mean_quantity, median_quantity: units per line with a positive quantity
    before the forecast weeks (``raw``: product_id, week, quantity)."""
    q = pl.col("quantity").cast(pl.Float64)
    return (
        raw.filter((pl.col("quantity") > 0) & (pl.col("week") < first_forecast_week))
        .group_by("product_id")
        .agg(mean_quantity=q.mean(), median_quantity=q.median())
        .sort("product_id")
    )


def cell_quantity(
    cells: pl.LazyFrame, means: pl.LazyFrame, coefficients: dict[str, float], overall: float
) -> pl.LazyFrame:
    """``cells`` (product_id, promotion: none/display/mailer/display+mailer, and optionally
    depth: the cell's discount on the shelf) with ``quantity``: E[units per line] = 1 + (mean -
    1) · exp(b_display · display + b_mailer · mailer + b_price · log(1 - depth)), the quantity
    model's plan and stock-up effects on the units beyond the first (the mean of all lines,
    ``overall``, for a product never seen). The model's price index is the shelf price over the
    product's typical price; a cell's discount is that index's log where the typical price is
    the regular one."""
    effect = sum(
        pl.col("promotion").str.contains(flag).cast(pl.Float64) * (coefficients.get(flag) or 0.0)
        for flag in ("display", "mailer")
    )
    if "depth" in cells.collect_schema().names():
        index = (1.0 - pl.col("depth").fill_null(0.0).clip(0.0, 0.95)).log()
        effect = effect + index * (coefficients.get("log_price_index") or 0.0)
    mean = pl.col("mean_quantity").fill_null(overall)
    return (
        cells.join(means.select("product_id", "mean_quantity"), on="product_id", how="left",
                   maintain_order="left")
        .with_columns(quantity=1.0 + (mean - 1.0).clip(lower_bound=0.0) * effect.exp())
        .drop("mean_quantity", strict=False)
    )  # fmt: skip


def median_units(buyers: np.ndarray, line_median: np.ndarray) -> np.ndarray:
    """(N,) the median forecast: the Poisson median of the buyers × the median units of one
    line (for one buyer, the median of the cell's units exactly; for more, close while most
    lines hold the same units). WAPE is minimised by the median, not by the mean."""
    return poisson_median(buyers) * np.asarray(line_median, dtype=np.float64)


def poisson_median(mean: np.ndarray) -> np.ndarray:
    """(N,) the median of a Poisson count with each mean (0 for a mean of 0)."""
    mean = np.asarray(mean, dtype=np.float64)
    out = np.zeros_like(mean)
    positive = mean > 0
    out[positive] = poisson.median(mean[positive])
    return out


def world_forecasts(
    cells: pl.DataFrame,
    lines: pl.DataFrame,
    quantity_fit: dict,
    buyers: np.ndarray,
    buyers_unpromoted: np.ndarray,
    depth: np.ndarray,
    *,
    factor: float,
) -> pl.DataFrame:
    """``cells`` (the demand forecast's rows) with ``quantity`` (units per line under the plan
    and the shelf's discount ``depth`` (N,)), ``world_model_buyers`` (factor × buyers), the
    mean forecast ``world_model``, the median ``world_model_median`` and
    ``world_model_no_promotion`` (the promotions removed: their buyers, and units per line
    without the plan's effects or the promoted cells' discounts). ``lines``:
    ``line_quantities``'s rows; ``quantity_fit``: the quantity model's coefficients and
    mean_quantity."""
    coef, overall = quantity_fit["coefficients"], float(quantity_fit["mean_quantity"])
    scaled, scaled_off = factor * np.asarray(buyers), factor * np.asarray(buyers_unpromoted)
    cells = cells.with_columns(depth=pl.Series(np.asarray(depth, dtype=np.float64)))
    kept = pl.when(pl.col("promotion") == "none").then(pl.col("depth")).otherwise(0.0)
    plain = cells.lazy().select("product_id", promotion=pl.lit("none"), depth=kept)
    unpromoted = cell_quantity(plain, lines.lazy(), coef, overall).collect()["quantity"]
    line_median = (
        cells.select("product_id")
        .join(lines, on="product_id", how="left", maintain_order="left")["median_quantity"]
        .fill_null(1.0)
        .to_numpy()
    )
    return (
        cell_quantity(cells.lazy(), lines.lazy(), coef, overall)
        .collect()
        .drop("depth")
        .with_columns(
            world_model_buyers=pl.Series(scaled),
            world_model=pl.Series(scaled) * pl.col("quantity"),
            world_model_median=median_units(scaled, line_median),
            world_model_no_promotion=pl.Series(scaled_off) * unpromoted,
        )
    )
