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

from retailsim_core.response.response_metrics import percentile_interval, product_resamples


def scale_sums(history: pl.DataFrame, naive: str = "seasonal_naive") -> tuple[float, int]:
    """(sum |observed - seasonal naive|, rows) over the rows before the forecast weeks: the
    MASE denominator's parts, added over chunks of cells (``mase_scale``)."""
    return float((history["units"] - history[naive]).abs().sum()), history.height


def mase_scale(abs_sum: float, rows: int) -> float:
    """Mean absolute error of the seasonal-naive forecast before the forecast weeks (0 rows or a
    constant history: NaN, no scale)."""
    return abs_sum / rows if rows and abs_sum > 0 else float("nan")


def ordered_sums(frame: pl.DataFrame, keys: list[str], exprs: dict[str, pl.Expr]) -> pl.DataFrame:
    """One row per ``keys`` group: each expression's sum over the group's rows, added in the
    order of the rows sorted by the keys, then every other column (a parallel group-by adds
    floats in an order that changes between runs, and the last bits with it: same data, same
    bytes)."""
    rest = [c for c in frame.columns if c not in keys]
    rows = frame.sort(*keys, *rest).select(*keys, **exprs)  # a group's rows together
    starts = np.flatnonzero(rows.select(pl.struct(keys).is_first_distinct()).to_series().to_numpy())
    out = rows.select(keys)[starts]
    return out.with_columns(
        pl.Series(name, np.add.reduceat(rows[name].to_numpy(), starts)) for name in exprs
    )


def product_sums(scored: pl.DataFrame, methods: list[str]) -> pl.DataFrame:
    """One row per product of ``scored`` (product_id, week, units and a column per method): the
    sums every score is made of. Products are whole within a chunk of cells, so the sums of
    chunks are stacked, never added."""
    error = {m: pl.col(m) - pl.col("units") for m in methods}
    chain = ordered_sums(
        ordered_sums(scored, ["product_id", "week"], {c: pl.col(c) for c in ("units", *methods)}),
        ["product_id"],
        {f"chain_{m}": e.abs() for m, e in error.items()},
    )
    sums = ordered_sums(
        scored,
        ["product_id"],
        {
            "observed": pl.col("units"),
            "rows": pl.lit(1.0),
            **{f"abs_{m}": e.abs() for m, e in error.items()},
            **{f"err_{m}": e for m, e in error.items()},
            **{f"sq_{m}": e.pow(2) for m, e in error.items()},
        },
    )
    return sums.join(chain, on="product_id")


def scores_from_sums(
    per_product: pl.DataFrame,
    methods: list[str],
    scale: float,
    *,
    reference: str | tuple[str, ...],
    n_boot: int = 500,
    seed: int = 0,
) -> dict:
    """{method: {wape, bias, mase, rmse, chain_wape, *_interval,
    wape_minus_<reference>_interval}} from ``product_sums`` rows (one paired difference per
    reference when several)."""
    per_product = per_product.sort("product_id")
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
        } | {f"{k}_interval": percentile_interval(v) for k, v in draws.items()}
    for ref in (reference,) if isinstance(reference, str) else reference:
        for m in methods:
            out[m][f"wape_minus_{ref}_interval"] = percentile_interval(
                wape_draws[m] - wape_draws[ref]
            )
    return {m: {k: _jsonable(v) for k, v in figures.items()} for m, figures in out.items()}


def _jsonable(value):
    if isinstance(value, list):  # an interval: null where no resample defined it
        return [None if v is None else float(v) for v in value]
    return float(value)
