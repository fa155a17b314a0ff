"""A Poisson model with product × store fixed effects: ``pyfixest``'s ``fepois`` (issue #61).

log E[units of cell c in week W] = alpha_c + beta · x_cW, with x the week's known inputs: the
plan's display and mailer (and both), the week's public holidays and the product's last price
index (``known_inputs``). Fitted once on the ``train_weeks`` before the forecast weeks, on each
cell's weeks since its first sale. A cell that sold nothing in those weeks has no finite
effect (separation: its likelihood peaks at alpha = -inf) and is forecast 0.

pyfixest estimates beta (the fixed effects demeaned out); each cell's effect is then the
model's own first-order condition for alpha_c, exact and vectorised over cells:
alpha_c = log(sum_W units_cW / sum_W exp(beta · x_cW)) over the fitted weeks.

Glossary: C cells, W weeks, K regressors.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from retailsim_core.demand.libraries.fixest import pyfixest

REGRESSORS = ("display", "mailer", "display_mailer", "holidays", "price_index")


@dataclass(frozen=True)
class FixedEffectsConfig:
    train_weeks: int = 26  # weeks before the forecast weeks the model is fitted on
    max_fit_cells: int = 200_000  # cells whose rows estimate the coefficients (drawn with the
    # check's seed where there are more); every cell's own effect comes from its own rows


def _design(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(
        display_mailer=pl.col("display") & pl.col("mailer"),
        holidays=pl.col("holidays").cast(pl.Float64),
    ).with_columns(pl.col(r).cast(pl.Float64) for r in REGRESSORS)


def _fit_rows(x: pl.DataFrame, first_forecast_week: int, cfg: FixedEffectsConfig) -> pl.DataFrame:
    weeks = (first_forecast_week - cfg.train_weeks, first_forecast_week - 1)
    return x.filter(pl.col("sold_before") & pl.col("week").is_between(*weeks))


def fit_fe(frame: pl.DataFrame, *, first_forecast_week: int, cfg: FixedEffectsConfig) -> dict:
    """{"coefficients": {regressor: beta or None where the fit dropped it}, "rows_fitted"}:
    ``fepois`` on ``frame``'s weeks after each cell's first sale in the fitted weeks.
    ``frame``: cell, week, units, sold_before and the EXOGENOUS columns (``known_inputs``),
    every cell on every week (``padded_panel``)."""
    pf = pyfixest()

    fit_rows = _fit_rows(_design(frame), first_forecast_week, cfg)
    model = pf.fepois(
        f"units ~ {' + '.join(REGRESSORS)} | cell",
        data=fit_rows.select("cell", "units", *REGRESSORS).to_pandas(),
        vcov="iid",
        copy_data=False,
        store_data=False,
    )
    coef = {str(k): float(v) for k, v in model.coef().items()}
    # a regressor without variation in the fitted weeks is dropped by the fit: no coefficient
    return {"coefficients": {r: coef.get(r) for r in REGRESSORS}, "rows_fitted": fit_rows.height}


def fe_forecasts(
    frame: pl.DataFrame, fit: dict, *, first_forecast_week: int, cfg: FixedEffectsConfig
) -> pl.DataFrame:
    """cell, week, poisson_fe for every forecast week of ``frame`` (as ``fit_fe``'s), each
    cell's effect from its own fitted weeks given ``fit``'s coefficients."""
    x = _design(frame)
    coef = fit["coefficients"]
    index = sum(pl.col(r) * (coef[r] or 0.0) for r in REGRESSORS)  # dropped: no effect
    effects = (
        _fit_rows(x, first_forecast_week, cfg)
        .group_by("cell")
        .agg(sold=pl.col("units").sum(), exposure=index.exp().sum())
        .filter(pl.col("sold") > 0)
        .select("cell", alpha=(pl.col("sold") / pl.col("exposure")).log())
    )
    return (
        x.filter(pl.col("week") >= first_forecast_week)
        .join(effects, on="cell", how="left")
        .select("cell", "week", poisson_fe=(pl.col("alpha") + index).exp().fill_null(0.0))
    )


def poisson_fe_forecasts(
    frame: pl.DataFrame, *, first_forecast_week: int, cfg: FixedEffectsConfig
) -> tuple[pl.DataFrame, dict]:
    """(``fe_forecasts`` of ``frame`` with the coefficients fitted on all of it, the fit)."""
    fit = fit_fe(frame, first_forecast_week=first_forecast_week, cfg=cfg)
    return fe_forecasts(frame, fit, first_forecast_week=first_forecast_week, cfg=cfg), fit
