"""How many units a shopper takes of a product they buy (issue #61): the quantity part of the
world model's demand (units = trips × basket × quantity), with its response to price and the
promotion plan (stocking up).

- **Lines.** Every line of the source with a positive quantity; a line of week W at store s is
  described by what the shelf showed, not by what the line paid: the product's unit price that
  week at the OTHER stores (leave-one-store-out, chain-wide; a multi-buy deal makes a line's own
  paid price depend on its quantity, so it is never read) over its typical price before the
  forecast weeks, and the plan's display and mailer at the store. Where no other store sold the
  product that week the index is its last price index (``known_inputs``).
- **Model.** A Poisson model of the units beyond the first (quantity - 1) with product fixed
  effects, through ``pyfixest``'s ``fepois``: log E[q - 1] = alpha_product + b · (log price
  index, display, mailer); b on the log price index is the stock-up elasticity (negative: more
  units when cheaper). Fitted on the ``train_weeks`` before the forecast weeks. A product never
  seen there gets the fitted lines' mean quantity.
- **Baseline.** The product's mean quantity per line before the forecast weeks (the overall
  mean for a product never seen).

Glossary: L lines, P products.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from retailsim_core.demand.cells.known_inputs import cents
from retailsim_core.demand.libraries.fixest import pyfixest
from retailsim_core.response.response_metrics import percentile_interval, product_resamples

QUANTITY_REGRESSORS = ("log_price_index", "display", "mailer")


@dataclass(frozen=True)
class QuantityConfig:
    train_weeks: int = 26  # weeks before the forecast weeks the model is fitted on


def line_frame(raw: pl.LazyFrame, plan: pl.LazyFrame, *, first_forecast_week: int) -> pl.LazyFrame:
    """product_id, store_id, week, quantity, log_price_index, display, mailer: every line with
    a positive quantity (``raw``: product_id, store_id, week, quantity, spend; ``plan``: week,
    product_id, store_id, display, mailer)."""
    lines = raw.filter(pl.col("quantity") > 0).with_columns(pl.col("week").cast(pl.Int16))
    store_week = lines.group_by("product_id", "store_id", "week").agg(
        s_spend=cents().sum(), s_qty=pl.col("quantity").sum()
    )
    chain = store_week.group_by("product_id", "week").agg(
        c_spend=pl.col("s_spend").sum(), c_qty=pl.col("s_qty").sum()
    )
    typical = (
        chain.filter(pl.col("week") < first_forecast_week)
        .group_by("product_id")
        .agg(typical=(pl.col("c_spend") / 100 / pl.col("c_qty")).median())
    )
    others = (pl.col("c_spend") - pl.col("s_spend")) / 100 / (pl.col("c_qty") - pl.col("s_qty"))
    shelf = (
        store_week.join(chain, on=["product_id", "week"])
        .join(typical, on="product_id", how="left")
        .select(
            "product_id",
            "store_id",
            "week",
            log_price_index=pl.when(pl.col("c_qty") > pl.col("s_qty"))
            .then((others / pl.col("typical")).clip(0.05, 3.0).log())
            .fill_nan(None),
        )
    )
    flags = plan.select(
        "product_id", "store_id", pl.col("week").cast(pl.Int16), "display", "mailer"
    )
    return (
        lines.select("product_id", "store_id", "week", pl.col("quantity").cast(pl.Float64))
        .join(shelf, on=["product_id", "store_id", "week"], how="left")
        .join(flags, on=["product_id", "store_id", "week"], how="left")
        .with_columns(
            pl.col("log_price_index").fill_null(0.0),
            pl.col("display").fill_null(False).cast(pl.Float64),
            pl.col("mailer").fill_null(False).cast(pl.Float64),
        )
        .sort(pl.all())  # joins keep no order; a fit's last bits follow its rows' order
    )


def quantity_forecasts(
    lines: pl.DataFrame, *, first_forecast_week: int, cfg: QuantityConfig
) -> tuple[pl.DataFrame, dict]:
    """(the forecast weeks' lines with ``product_mean`` and ``quantity_model``, the fit's
    coefficients and sizes). ``lines``: ``line_frame``'s rows."""
    pf = pyfixest()

    before = lines.filter(pl.col("week") < first_forecast_week)
    fit_rows = before.filter(pl.col("week") >= first_forecast_week - cfg.train_weeks)
    model = pf.fepois(
        f"extra ~ {' + '.join(QUANTITY_REGRESSORS)} | product_id",
        data=fit_rows.select(
            "product_id", *QUANTITY_REGRESSORS, extra=pl.col("quantity") - 1.0
        ).to_pandas(),
        vcov="iid",
        copy_data=False,
        store_data=False,
    )
    coef = {str(k): float(v) for k, v in model.coef().items()}
    index = sum(pl.col(r) * coef.get(r, 0.0) for r in QUANTITY_REGRESSORS)
    effects = (  # each product's effect from the model's first-order condition, as fixed_effects
        fit_rows.group_by("product_id")
        .agg(extra=(pl.col("quantity") - 1.0).sum(), exposure=index.exp().sum())
        .select("product_id", alpha=(pl.col("extra") / pl.col("exposure")).log())
    )
    overall = float(fit_rows["quantity"].mean())
    means = before.group_by("product_id").agg(product_mean=pl.col("quantity").mean())
    test = (
        lines.filter(pl.col("week") >= first_forecast_week)
        .join(means, on="product_id", how="left")
        .join(effects, on="product_id", how="left")
        .with_columns(
            product_mean=pl.col("product_mean").fill_null(overall),
            quantity_model=pl.when(pl.col("alpha").is_not_null())
            .then(1.0 + (pl.col("alpha") + index).exp())
            .otherwise(pl.lit(overall)),
            # The same line without its promotion (price index 1, no display, no mailer).
            quantity_no_promotion=pl.when(pl.col("alpha").is_not_null())
            .then(1.0 + pl.col("alpha").exp())
            .otherwise(pl.lit(overall)),
        )
        .drop("alpha")
    )
    fit = {
        "coefficients": {r: coef.get(r) for r in QUANTITY_REGRESSORS},
        "lines_fitted": fit_rows.height,
        "products_fitted": effects.height,
        "mean_quantity": overall,
    }
    return test, fit


QUANTITY_METHODS = ("quantity_model", "product_mean")


def quantity_scores(test: pl.DataFrame, *, n_boot: int, seed: int) -> dict:
    """{part: {method: mae, rmse, bias (mean error over mean quantity), their 95% intervals
    over product resamples; the model's paired MAE difference to the product mean}} over all
    forecast lines and over lines on promotion (display, mailer or a price index below 0.95)."""
    promoted = (
        (pl.col("display") > 0) | (pl.col("mailer") > 0) | (pl.col("log_price_index") < -0.05)
    )
    out = {"lines": test.height}
    for part, rows in (("all", test), ("promoted", test.filter(promoted))):
        if rows.is_empty():
            continue
        out[part] = _part_scores(rows, n_boot=n_boot, seed=seed)
    return out


def _part_scores(rows: pl.DataFrame, *, n_boot: int, seed: int) -> dict:
    err = {m: pl.col(m) - pl.col("quantity") for m in QUANTITY_METHODS}
    per = (
        rows.group_by("product_id")
        .agg(
            n=pl.len().cast(pl.Float64),
            q=pl.col("quantity").sum(),
            **{f"abs_{m}": e.abs().sum() for m, e in err.items()},
            **{f"sq_{m}": e.pow(2).sum() for m, e in err.items()},
            **{f"err_{m}": e.sum() for m, e in err.items()},
        )
        .sort("product_id")
    )
    w = product_resamples(per.height, n_boot, seed)  # (N, P)
    n, q = per["n"].to_numpy(), per["q"].to_numpy()
    bn, bq = w @ n, w @ q
    out, mae_draws = {"lines": rows.height}, {}
    for m in QUANTITY_METHODS:
        a, s, e = (per[f"{k}_{m}"].to_numpy() for k in ("abs", "sq", "err"))
        draws = {"mae": (w @ a) / bn, "rmse": np.sqrt((w @ s) / bn), "bias": (w @ e) / bq}
        mae_draws[m] = draws["mae"]
        out[m] = {"mae": float(a.sum() / n.sum()), "rmse": float(np.sqrt(s.sum() / n.sum())),
                  "bias": float(e.sum() / q.sum())} | {
            f"{k}_interval": percentile_interval(v) for k, v in draws.items()
        }  # fmt: skip
    diff = mae_draws["quantity_model"] - mae_draws["product_mean"]
    out["quantity_model"]["mae_minus_product_mean_interval"] = percentile_interval(diff)
    return out
