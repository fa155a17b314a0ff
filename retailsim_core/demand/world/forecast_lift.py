"""The promotion lift on forecasts (issue #61): does a method know which products a promotion
lifts more? Judged on the test weeks' cell-weeks of the demand forecast.

- **Events.** A product's promoted cell-weeks at cells (product × store) that also have test
  weeks without a promotion (else nothing says what the cell sells unpromoted).
- **Observed lift** of a product: log((on + k) / (off + k)), on = its units in the promoted
  cell-weeks, off = what the same cells sold per unpromoted test week × their promoted weeks
  (zero-sale weeks counted), k = ``smoothing`` × (on + off) / 2. Multiplying a product's units by
  any factor leaves it unchanged: it ranks the response, not the volume (a +1 in each
  count would push every rarely sold product to zero lift).
- **A method's lift**: the same formula with on = its forecasts of the promoted cell-weeks and
  off = its forecasts of the same cell-weeks with the promotion removed (trips, shelf and units
  per line all see the change).
- **Scores**: Spearman over the products with at least ``min_events`` promoted cell-weeks,
  product-resample interval; the split-half ceiling on the same products (observed lifts of
  the odd- against the even-ranked stores, Spearman–Brown, square root: how well a perfect
  model could correlate with a noisy observed lift) and each method's share of it.

Glossary: P products.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy.stats import spearmanr

from retailsim_core.response.response_metrics import percentile_interval

CELL = ["product_id", "store_id"]


def events(frame: pl.DataFrame) -> pl.DataFrame:
    """The promoted cell-weeks of cells with unpromoted test weeks, each with its cell's mean
    observed units per unpromoted week (``off_level``)."""
    promo = pl.col("promotion") != "none"
    return (
        frame.with_columns(
            off_level=pl.col("observed_units").filter(~promo).mean().over(CELL),
            off_weeks=(~promo).sum().over(CELL),
        )
        .filter(promo & (pl.col("off_weeks") > 0))
        .drop("off_weeks")
    )


def smoothed_lift(on: pl.Expr, off: pl.Expr, smoothing: float) -> pl.Expr:
    """log((on + k) / (off + k)), k = smoothing × (on + off) / 2; 0 where both are 0."""
    k = smoothing * (on + off) / 2
    return pl.when((on + off) > 0).then(((on + k) / (off + k)).log()).otherwise(0.0)


def product_lifts(
    rows: pl.DataFrame, pairs: dict[str, tuple[str, str]], smoothing: float
) -> pl.DataFrame:
    """(P,) product_id, events, observed and each method's lift from ``events`` rows."""
    sums = {"on": pl.col("observed_units").sum(), "off": pl.col("off_level").sum()}
    for name, (promoted, unpromoted) in pairs.items():
        sums |= {f"{name}_on": pl.col(promoted).sum(), f"{name}_off": pl.col(unpromoted).sum()}
    per = rows.sort(*CELL, "week").group_by("product_id", maintain_order=True).agg(
        events=pl.len(), **sums
    )  # fmt: skip
    return per.select(
        "product_id",
        "events",
        observed=smoothed_lift(pl.col("on"), pl.col("off"), smoothing),
        **{
            name: smoothed_lift(pl.col(f"{name}_on"), pl.col(f"{name}_off"), smoothing)
            for name in pairs
        },
    ).sort("product_id")


def lift_check(
    frame: pl.DataFrame,
    pairs: dict[str, tuple[str, str]],
    *,
    min_events: int = 10,
    smoothing: float = 0.1,
    n_boot: int = 500,
    seed: int = 0,
) -> dict:
    """{products, events, ceiling, methods: {name: spearman, interval, share_of_ceiling}} over
    the products with at least ``min_events`` events (``frame``: the forecast cell-weeks with
    observed_units, promotion and every column ``pairs`` names: method -> (promoted forecast,
    forecast without the promotion))."""
    rows = events(frame)
    lifts = product_lifts(rows, pairs, smoothing).filter(pl.col("events") >= min_events)
    ranked = rows.with_columns(half=(pl.col("store_id").rank("dense") % 2).cast(pl.Int8))
    halves = [
        product_lifts(ranked.filter(pl.col("half") == h), {}, smoothing).select(
            "product_id", pl.col("observed").alias(f"half_{h}")
        )
        for h in (0, 1)
    ]
    both = lifts.select("product_id").join(halves[0], on="product_id").join(
        halves[1], on="product_id"
    )  # fmt: skip
    ceiling = _ceiling(both["half_0"].to_numpy(), both["half_1"].to_numpy())
    out = {"products": lifts.height, "events": int(lifts["events"].sum()),
           "min_events": min_events, "smoothing": smoothing,
           "ceiling": ceiling | {"products": both.height}, "methods": {}}  # fmt: skip
    if lifts.height < 3:
        return out
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, lifts.height, size=(n_boot, lifts.height))  # product resamples
    y = lifts["observed"].to_numpy()
    for name in pairs:
        x = lifts[name].to_numpy()
        rho = _spearman(x, y)
        boot = np.array([_spearman(x[d], y[d]) for d in draws])
        share = rho / ceiling["ceiling"] if ceiling["ceiling"] else None
        out["methods"][name] = {
            "spearman": rho,
            "spearman_interval": percentile_interval(boot),
            "share_of_ceiling": share,
        }
    return out


def _ceiling(a: np.ndarray, b: np.ndarray) -> dict:
    if len(a) < 3:
        return {"split_half": None, "full_set": None, "ceiling": None}
    r = _spearman(a, b)
    full = 2 * r / (1 + r) if r > -1 else None
    root = float(np.sqrt(full)) if full is not None and full > 0 else None
    return {"split_half": r, "full_set": full, "ceiling": root}


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(x, y)[0])
