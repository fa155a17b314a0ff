"""The forecasts' promotion responses against what the generator planted (issue #61, D132).

On the synthetic default the mailer brings shoppers in and a cut makes a line hold more units
(``synth/plan_response.py``). Both are known exactly per row, so the forecasts' responses can
be scored row by row:

- **Traffic.** For every forecast customer-week of a planted shopper who shops at all that
  week: the planted lift in the chance of a visit, P(visit | the week's mailer) / P(visit | no
  mailer) = (1 - exp(-rate x m)) / (1 - exp(-rate)), against the visit model's own,
  p_visit / p_visit_no_mailer (the same week with its mailer features at zero).
- **Quantity.** For every forecast line: the planted units-per-line lift of its shelf price,
  r^(-s) below the regular price, against the quantity model's, its forecast over the same
  line without the promotion (price index 1, no display, no mailer).

Each gives the Pearson correlation of the log lifts with a 95% interval over resamples of
customers (traffic) or products (quantity), and the mean lift planted and forecast.

Glossary: N rows, U resampled units (customers or products).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from retailsim_core.response.response_metrics import percentile_interval, product_resamples
from retailsim_core.synth.baskets import expected_visits
from retailsim_core.synth.plan_response import units_multiplier


def planted_visit_lift(world, visits: pl.DataFrame) -> pl.DataFrame:
    """customer_id, week, planted, forecast: the visit lifts of ``visits``' rows (customer_id,
    week, p_visit, p_visit_no_mailer) whose customer the world planted and who shops that week."""
    index = pl.DataFrame(
        {"customer_id": world.population.code, "idx": np.arange(world.population.n_customers)}
    ).filter(pl.col("customer_id") != "")
    rows = visits.join(index, on="customer_id", how="inner", maintain_order="left")
    parts = []
    for (week,), part in rows.partition_by("week", as_dict=True, maintain_order=True).items():
        idx = part["idx"].to_numpy()
        with_mailer = expected_visits(world, int(week))[idx]
        without = expected_visits(world, int(week), mailer=False)[idx]
        lift = -np.expm1(-with_mailer) / np.where(without > 0, -np.expm1(-without), np.nan)
        parts.append(part.with_columns(planted=pl.Series(lift)))
    return (
        pl.concat(parts)
        .filter(pl.col("planted").is_finite())
        .select(
            "customer_id",
            "week",
            "planted",
            forecast=pl.col("p_visit") / pl.col("p_visit_no_mailer"),
        )
    )


def planted_quantity_lift(world, lines: pl.DataFrame) -> pl.DataFrame:
    """product_id, store_id, week, planted, forecast: the units-per-line lifts of ``lines``
    (product_id, store_id, week, quantity_model, quantity_no_promotion)."""
    cat = world.catalogue
    product = pl.DataFrame({"product_id": cat.product_code, "p": np.arange(cat.n_products)})
    store = pl.DataFrame({"store_id": cat.store_code, "region": cat.store_region})
    rows = lines.join(product, on="product_id", maintain_order="left").join(
        store, on="store_id", maintain_order="left"
    )
    depth = world.prices.depth[
        rows["week"].to_numpy(), rows["p"].to_numpy(), rows["region"].to_numpy()
    ]
    return rows.select(
        "product_id",
        "store_id",
        "week",
        planted=pl.Series(units_multiplier(world, 1.0 - depth.astype(np.float64))),
        forecast=pl.col("quantity_model") / pl.col("quantity_no_promotion"),
    )


def lift_recovery(lifts: pl.DataFrame, unit: str, *, n_boot: int, seed: int) -> dict:
    """Pearson correlation of log(planted) and log(forecast) over ``lifts``' rows, the mean of
    each lift, and 95% intervals over resamples of ``unit`` (a column of ``lifts``)."""
    logs = lifts.select(
        unit, x=pl.col("planted").log(), y=pl.col("forecast").log(), a=pl.col("planted"),
        b=pl.col("forecast"),
    ).filter(pl.col("y").is_finite())  # fmt: skip
    sums = (
        logs.group_by(unit)
        .agg(
            n=pl.len().cast(pl.Float64),
            x=pl.col("x").sum(),
            y=pl.col("y").sum(),
            xx=(pl.col("x") ** 2).sum(),
            yy=(pl.col("y") ** 2).sum(),
            xy=(pl.col("x") * pl.col("y")).sum(),
            a=pl.col("a").sum(),
            b=pl.col("b").sum(),
        )  # fmt: skip
        .sort(unit)
    )
    w = np.vstack([np.ones(sums.height), product_resamples(sums.height, n_boot, seed)])  # (1+N, U)
    n, x, y, xx, yy, xy, a, b = (w @ sums[c].to_numpy() for c in ("n", "x", "y", "xx", "yy", "xy",
                                                                   "a", "b"))  # fmt: skip
    cov, vx, vy = xy / n - x * y / n**2, xx / n - (x / n) ** 2, yy / n - (y / n) ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        r = cov / np.sqrt(vx * vy)
    return {
        "rows": logs.height,
        "correlation": float(r[0]),
        "correlation_interval": percentile_interval(r[1:]),
        "planted_mean_lift": float(a[0] / n[0]),
        "forecast_mean_lift": float(b[0] / n[0]),
        "forecast_mean_lift_interval": percentile_interval(b[1:] / n[1:]),
    }
