"""How a unit forecast is scored (issue #61): WAPE, bias and MASE over the forecast weeks'
cell-weeks, with 95% intervals over product resamples (a product's cells and weeks move
together), and each method's paired WAPE difference to a reference on the same resamples.

- WAPE = sum |observed - forecast| / sum observed;
- bias = sum (forecast - observed) / sum observed (positive: over-forecast);
- MASE = mean |observed - forecast| / the in-sample mean absolute error of the seasonal-naive
  forecast over the weeks before the forecast weeks (pooled over cells);
- RMSE = the root mean squared error per cell-week: a mean forecast's score (WAPE, an absolute
  error, is minimised by the median, which on cells that sell in a few weeks is zero: a
  forecast of nothing scores a WAPE of exactly 1);
- chain WAPE = WAPE of each product's units summed over the stores, per week (what a chain
  orders from its suppliers).

Glossary: R cell-weeks scored, P products, N resamples.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from retailsim_core.response.response_metrics import product_resamples


def naive_scale(history: pl.DataFrame, naive: str = "seasonal_naive") -> float:
    """Mean absolute error of the seasonal-naive forecast on the rows before the forecast
    weeks: the MASE denominator (0 rows or a constant history: NaN, no scale)."""
    if history.is_empty():
        return float("nan")
    scale = float((history["units"] - history[naive]).abs().mean())
    return scale if scale > 0 else float("nan")


def forecast_scores(
    scored: pl.DataFrame,
    methods: list[str],
    scale: float,
    *,
    reference: str,
    n_boot: int = 500,
    seed: int = 0,
) -> dict:
    """{method: {wape, bias, mase, rmse, chain_wape, *_interval,
    wape_minus_<reference>_interval}} over the rows of ``scored`` (product_id, week, units and
    a column per method)."""
    chain = (
        scored.group_by("product_id", "week")
        .agg(pl.col("units", *methods).sum())
        .group_by("product_id")
        .agg(**{f"chain_{m}": (pl.col(m) - pl.col("units")).abs().sum() for m in methods})
    )
    per_product = (
        scored.group_by("product_id")
        .agg(
            observed=pl.col("units").sum(),
            rows=pl.len(),
            **{f"abs_{m}": (pl.col(m) - pl.col("units")).abs().sum() for m in methods},
            **{f"err_{m}": (pl.col(m) - pl.col("units")).sum() for m in methods},
            **{f"sq_{m}": (pl.col(m) - pl.col("units")).pow(2).sum() for m in methods},
        )
        .join(chain, on="product_id")
        .sort("product_id")
    )
    weights = product_resamples(per_product.height, n_boot, seed)  # (N, P)
    observed = per_product["observed"].to_numpy()
    rows = per_product["rows"].to_numpy().astype(np.float64)
    boot_observed, boot_rows = weights @ observed, weights @ rows  # (N,)
    out, wape_draws = {}, {}
    for m in methods:
        abs_err = per_product[f"abs_{m}"].to_numpy()
        err = per_product[f"err_{m}"].to_numpy()
        sq, chain_err = per_product[f"sq_{m}"].to_numpy(), per_product[f"chain_{m}"].to_numpy()
        draws = {
            "wape": (weights @ abs_err) / boot_observed,
            "bias": (weights @ err) / boot_observed,
            "mase": (weights @ abs_err) / boot_rows / scale,
            "rmse": np.sqrt((weights @ sq) / boot_rows),
            "chain_wape": (weights @ chain_err) / boot_observed,
        }
        wape_draws[m] = draws["wape"]
        out[m] = {
            "wape": abs_err.sum() / observed.sum(),
            "bias": err.sum() / observed.sum(),
            "mase": abs_err.sum() / rows.sum() / scale,
            "rmse": np.sqrt(sq.sum() / rows.sum()),
            "chain_wape": chain_err.sum() / observed.sum(),
        } | {f"{k}_interval": _interval(v) for k, v in draws.items()}
    for m in methods:
        diff = wape_draws[m] - wape_draws[reference]
        out[m][f"wape_minus_{reference}_interval"] = _interval(diff)
    return {m: {k: _jsonable(v) for k, v in figures.items()} for m, figures in out.items()}


def _interval(draws: np.ndarray) -> list[float]:
    finite = draws[np.isfinite(draws)]
    if finite.size == 0:
        return [float("nan"), float("nan")]
    return [float(np.percentile(finite, 2.5)), float(np.percentile(finite, 97.5))]


def _jsonable(value):
    return [float(v) for v in value] if isinstance(value, list) else float(value)
