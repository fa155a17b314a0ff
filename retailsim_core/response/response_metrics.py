"""How well a method's promotion response matches held-out promotion events (decision D76).

Every method predicts, for each event (``promotion_events.promotion_events``), the cell's units
with its promotion and without it, in the same context. From those:

- its **lift** per product, defined as the observed one is: log((mean units with + 1) / (mean
  units without + 1)) per product × store, the mean over stores weighted by events;
- **Spearman** of predicted against observed lifts over products;
- the **calibration slope**: observed lift regressed on predicted (weighted by events; 1 is
  calibrated, below 1 over-confident);
- the **mean-lift ratio**: event-weighted mean predicted lift over mean observed lift;
- **WAPE** of the promoted units over event cells: sum |observed - predicted| / sum observed.

Intervals resample products (a product's events are correlated): 95% percentile intervals of
``n_boot`` resamples, the same resamples for every method so paired differences get their own.

Glossary: E events, P products, N resamples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy.stats import rankdata

PRODUCT_STORE = ("product_id", "store_id")


def predicted_lifts(events: pl.DataFrame, promoted: str, unpromoted: str) -> pl.DataFrame:
    """(P,) product_id, lift, events: a method's lift from its two predictions per event."""
    per_store = (
        events.group_by(PRODUCT_STORE)
        .agg(on=pl.col(promoted).mean(), off=pl.col(unpromoted).mean(), events=pl.len())
        .with_columns(lift=((pl.col("on") + 1) / (pl.col("off") + 1)).log())
        .sort(PRODUCT_STORE)  # a product's sums add its stores in this order: the same bytes
    )
    return (
        per_store.group_by("product_id", maintain_order=True)
        .agg(
            lift=(pl.col("lift") * pl.col("events")).sum() / pl.col("events").sum(),
            events=pl.col("events").sum().cast(pl.Int64),
        )
        .sort("product_id")
    )


def product_resamples(n_products: int, n_boot: int, seed: int) -> np.ndarray:
    """(N, P) multinomial weights: how often each product is drawn in each resample."""
    rng = np.random.default_rng(seed)
    p = np.full(n_products, 1.0 / max(n_products, 1))
    return rng.multinomial(n_products, p, size=n_boot).astype(np.float64)


@dataclass(frozen=True)
class ResponseMetrics:
    summary: dict  # the figures and their 95% intervals (JSON-ready)
    wape_resamples: np.ndarray  # (N,) WAPE under each product resample, for paired differences


def response_metrics(
    observed: pl.DataFrame,
    events: pl.DataFrame,
    promoted: str,
    unpromoted: str,
    weights: np.ndarray,
    units: str = "units",
) -> ResponseMetrics:
    """Metrics of one method against ``observed`` (``promotion_events.product_lifts``, one row
    per product, in the order ``weights`` (N, P) were drawn for); ``events`` carry the observed
    ``units`` and the method's ``promoted`` / ``unpromoted`` predictions."""
    pred = predicted_lifts(events, promoted, unpromoted)
    table = observed.select("product_id", "lift", "events").join(  # rows stay in weights' order
        pred.select("product_id", predicted="lift"),
        on="product_id",
        how="left",
        maintain_order="left",
    )
    obs, hat = table["lift"].to_numpy(), table["predicted"].fill_null(0.0).to_numpy()
    n = table["events"].to_numpy().astype(np.float64)
    point = np.ones((1, len(obs)))
    abs_err, total = _event_sums(table["product_id"], events, units, promoted)
    wape_point, wape_boot = _ratio(point, abs_err, total)[0], _ratio(weights, abs_err, total)
    out = {
        "products": len(obs),
        "events": int(n.sum()),
        "spearman": _float(_spearman(point, obs, hat)[0]),
        "calibration_slope": _float(_slope(point * n, obs, hat)[0]),
        "mean_lift_ratio": _float(_ratio(point, n * hat, n * obs)[0]),
        "wape": _float(wape_point),
    }
    boot = {
        "spearman": _spearman(weights, obs, hat),
        "calibration_slope": _slope(weights * n, obs, hat),
        "mean_lift_ratio": _ratio(weights, n * hat, n * obs),
        "wape": wape_boot,
    }
    out |= {f"{name}_ci": percentile_interval(values) for name, values in boot.items()}
    return ResponseMetrics(out, wape_boot)


def paired_difference(a: ResponseMetrics, b: ResponseMetrics) -> dict:
    """WAPE of method ``a`` minus method ``b`` on the same resamples, with its 95% interval."""
    diff = a.wape_resamples - b.wape_resamples
    point = a.summary["wape"] - b.summary["wape"]
    return {"wape_difference": point, "wape_difference_ci": percentile_interval(diff)}


def _event_sums(
    products: pl.Series, events: pl.DataFrame, units: str, promoted: str
) -> tuple[np.ndarray, np.ndarray]:
    """(P,) per product of ``products``: sum |observed - predicted| and sum observed units."""
    sums = events.group_by("product_id").agg(
        err=(pl.col(units) - pl.col(promoted)).abs().sum(), total=pl.col(units).sum()
    )
    joined = pl.DataFrame({"product_id": products}).join(
        sums, on="product_id", how="left", maintain_order="left"
    )
    return joined["err"].fill_null(0.0).to_numpy(), joined["total"].fill_null(0.0).to_numpy()


def _ratio(w: np.ndarray, num: np.ndarray, den: np.ndarray) -> np.ndarray:
    bottom = w @ den
    return np.where(bottom != 0, (w @ num) / np.where(bottom != 0, bottom, 1.0), np.nan)


def _slope(w: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """(N,) weighted least-squares slope of y on x (with intercept) under each weight row."""
    sw = w.sum(1)
    mx, my = (w @ x) / sw, (w @ y) / sw
    sxx = w @ (x * x) - sw * mx * mx
    sxy = w @ (x * y) - sw * mx * my
    return np.where(sxx > 1e-12, sxy / np.where(sxx > 1e-12, sxx, 1.0), np.nan)


def _spearman(w: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """(N,) Spearman correlation of the products drawn by each weight row (a product drawn
    twice counts twice; ties take mean ranks)."""
    out = np.full(len(w), np.nan)
    for i, row in enumerate(w):
        idx = np.repeat(np.arange(len(y)), row.astype(np.int64))
        if len(idx) > 2:
            ry, rx = rankdata(y[idx]), rankdata(x[idx])
            if ry.std() > 0 and rx.std() > 0:
                out[i] = float(np.corrcoef(ry, rx)[0, 1])
    return out


def _float(value) -> float | None:
    return None if np.isnan(value) else float(value)


def percentile_interval(draws: np.ndarray) -> list[float | None]:
    """The 95% percentile interval of resampled figures, over the finite draws (a resample
    can leave a ratio undefined); [None, None] when none is finite (JSON's null)."""
    ok = draws[np.isfinite(draws)]
    if not len(ok):
        return [None, None]
    return [float(v) for v in np.percentile(ok, [2.5, 97.5])]


def calibration_bins(
    products: pl.DataFrame, predicted: str, observed: str = "observed_lift", bins: int = 10
) -> list[dict]:
    """The calibration plot's points: products ordered by ``predicted`` lift in ``bins`` groups
    of about equal events, each with its event-weighted mean predicted and observed lift."""
    df = products.select(predicted, observed, "events").drop_nulls().sort(predicted)
    if df.height == 0:
        return []
    share = df["events"].cum_sum() / df["events"].sum()
    group = np.minimum((share.to_numpy() * bins - 1e-9).astype(np.int64), bins - 1)
    out = (
        df.with_columns(bin=pl.Series(np.maximum(group, 0)))
        .group_by("bin")
        .agg(
            predicted=(pl.col(predicted) * pl.col("events")).sum() / pl.col("events").sum(),
            observed=(pl.col(observed) * pl.col("events")).sum() / pl.col("events").sum(),
            products=pl.len(),
            events=pl.col("events").sum(),
        )
        .sort("bin")
    )
    return out.drop("bin").to_dicts()
