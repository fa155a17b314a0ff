"""How a unit forecast is scored (issue #61): WAPE, bias and MASE over the forecast weeks'
cell-weeks, with 95% intervals over product resamples (a product's cells and weeks move
together), and each method's paired WAPE difference to a reference on the same resamples.

- WAPE = sum |observed - forecast| / sum observed;
- bias = sum (forecast - observed) / sum observed (positive: over-forecast);
- MASE = mean |observed - forecast| / the in-sample mean absolute error of the seasonal-naive
  forecast over the weeks before the forecast weeks (pooled over cells).

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
    """{method: {wape, bias, mase, *_interval, wape_minus_<reference>_interval}} over the rows
    of ``scored`` (product_id, units and a column per method)."""
    per_product = (
        scored.group_by("product_id")
        .agg(
            observed=pl.col("units").sum(),
            rows=pl.len(),
            **{f"abs_{m}": (pl.col(m) - pl.col("units")).abs().sum() for m in methods},
            **{f"err_{m}": (pl.col(m) - pl.col("units")).sum() for m in methods},
        )
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
        draws = {
            "wape": (weights @ abs_err) / boot_observed,
            "bias": (weights @ err) / boot_observed,
            "mase": (weights @ abs_err) / boot_rows / scale,
        }
        wape_draws[m] = draws["wape"]
        out[m] = {
            "wape": abs_err.sum() / observed.sum(),
            "bias": err.sum() / observed.sum(),
            "mase": abs_err.sum() / rows.sum() / scale,
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
