"""Gradient-boosted trees on lags, rolling means, the promotion plan, price and calendar: LightGBM
through ``mlforecast``, the M5 competition's winning family (issue #61).

The trees are fitted once, on the weeks before the forecast weeks (``preprocess`` builds the
features, ``fit_models`` fits them); each forecast week W is then predicted one step ahead from
the cell's units before W and W's plan (``predict`` with ``new_df`` and ``X_df``: the rolling
origin every other method of the check uses). Two objectives:

- ``lightgbm_l1``: absolute error, the loss WAPE scores (its forecasts are conditional medians);
- ``lightgbm_tweedie``: the Tweedie deviance M5's winners used (conditional means).

The frame is the padded panel (``padded_panel``): every cell on every week from ``start`` on,
zeros before its first sale, as the seasonal-naive and moving-average forecasts read them.

Glossary: C cells, W weeks of the frame, F features.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from retailsim_core.demand.cells.known_inputs import EXOGENOUS

TARGET_WINDOWS = (4, 13)  # rolling means of the units before W: a month, a quarter
OBJECTIVES = {"lightgbm_l1": "l1", "lightgbm_tweedie": "tweedie"}


@dataclass(frozen=True)
class GbmConfig:
    train_weeks: int = 26  # weeks of rows the trees fit on: the last before the forecast weeks
    n_estimators: int = 120  # boosting rounds (tuned on validation weeks with the rate: D116)
    learning_rate: float = 0.1
    num_leaves: int = 63
    min_child_samples: int = 200  # most cell-weeks are zeros: leaves need many rows
    bagging_fraction: float = 0.5  # rows drawn per round (speed; the seed fixes them)
    max_train_cells: int = 50_000  # cells whose rows the trees fit on (a global model needs
    # many series, not every one: The Complete Journey has 0.5 million)
    threads: int = 2  # fixed, so the same seed gives the same trees on any machine
    seed: int = 0


def lags_of(season: int) -> list[int]:
    """The units lags the trees read: the last four weeks, and a year where the data has one."""
    return [1, 2, 3, 4, *([season] if season > 4 else [])]


def history_weeks(season: int) -> int:
    """Weeks of units a training row's features reach back: its longest lag or window."""
    return max(*lags_of(season), *TARGET_WINDOWS)


def first_week_read(first_forecast_week: int, season: int, cfg: GbmConfig) -> int:
    """The first week of units the trees read: ``history_weeks`` before their first training
    week, itself at most ``train_weeks`` before the forecast weeks and never before week 1 (the
    lags of early rows may reach before the data: zeros, ``padded_panel``)."""
    train = min(cfg.train_weeks, first_forecast_week - 1)
    return first_forecast_week - train - history_weeks(season)


def draw_cells(cells: pl.Series, cfg: GbmConfig) -> pl.Series:
    """The cells whose rows the trees fit on: up to ``max_train_cells``, drawn with the seed."""
    return cells.unique().sort().sample(min(cfg.max_train_cells, cells.n_unique()), seed=cfg.seed)


def _series(frame: pl.DataFrame, start: int) -> pl.DataFrame:
    return frame.filter(pl.col("week") >= start).select(
        unique_id=pl.col("cell"),
        ds=pl.col("week").cast(pl.Int64),
        y=pl.col("units").cast(pl.Float32),
        **{c: pl.col(c).cast(pl.Float32) for c in EXOGENOUS},
    )


def fit_gbm(frame: pl.DataFrame, *, first_forecast_week: int, season: int, cfg: GbmConfig):
    """The mlforecast forecaster with both objectives' trees fitted on ``frame`` (cell, week,
    units, sold_before, EXOGENOUS; every cell on every week from the frame's first) before
    the forecast weeks, on the weeks after each cell's first sale (``padded_panel``: as every
    forecast week is)."""
    import lightgbm as lgb  # heavy imports: only this check needs them
    from mlforecast import MLForecast
    from mlforecast.lag_transforms import RollingMean

    start, span = first_week_read(first_forecast_week, season, cfg), history_weeks(season)
    forecaster = MLForecast(
        models={
            m: lgb.LGBMRegressor(objective=o, **lightgbm_params(cfg)) for m, o in OBJECTIVES.items()
        },
        freq=1,
        lags=lags_of(season),
        lag_transforms={1: [RollingMean(window_size=w) for w in TARGET_WINDOWS]},
        num_threads=cfg.threads,
    )
    history = _series(frame, start).filter(pl.col("ds") < first_forecast_week)
    rows = forecaster.preprocess(history, static_features=[], keep_last_n=span)
    after = frame.filter("sold_before").select(unique_id="cell", ds=pl.col("week").cast(pl.Int64))
    rows = rows.join(after, on=["unique_id", "ds"])  # rows like the forecasts': after a sale
    forecaster.fit_models(rows.drop("unique_id", "ds", "y"), rows["y"].to_numpy())
    return forecaster


def predict_gbm(
    forecaster, frame: pl.DataFrame, *, first_forecast_week: int, season: int, cfg: GbmConfig
) -> pl.DataFrame:
    """cell, week and a column per objective for every forecast week of ``frame`` (as
    ``fit_gbm``'s): each week one step ahead from the cell's units before it and the week's
    known inputs (``predict`` with the week's history and plan)."""
    span = history_weeks(season)
    series = _series(frame, first_week_read(first_forecast_week, season, cfg))
    out = []
    for week in range(first_forecast_week, int(series["ds"].max()) + 1):
        known = series.filter(pl.col("ds").is_between(week - span, week - 1))
        plan = series.filter(pl.col("ds") == week).drop("y")
        out.append(forecaster.predict(h=1, new_df=known, X_df=plan))
    return pl.concat(out).select(
        cell=pl.col("unique_id").cast(pl.UInt32),
        week=pl.col("ds").cast(pl.Int16),
        **{m: pl.col(m).clip(lower_bound=0.0).cast(pl.Float64) for m in OBJECTIVES},
    )


def gbm_forecasts(
    frame: pl.DataFrame, *, first_forecast_week: int, season: int, cfg: GbmConfig
) -> pl.DataFrame:
    """``predict_gbm`` over ``frame`` with trees fitted on the rows of its ``draw_cells``."""
    drawn = draw_cells(frame["cell"], cfg)
    sample = frame.filter(pl.col("cell").is_in(drawn.implode()))
    kwargs = dict(first_forecast_week=first_forecast_week, season=season, cfg=cfg)
    return predict_gbm(fit_gbm(sample, **kwargs), frame, **kwargs)


def lightgbm_params(cfg) -> dict:
    """The LightGBM settings of a config with this module's fields (``GbmConfig``, the trips'
    ``TripsConfig``): deterministic for a seed and a thread count."""
    return dict(
        n_estimators=cfg.n_estimators,
        learning_rate=cfg.learning_rate,
        num_leaves=cfg.num_leaves,
        min_child_samples=cfg.min_child_samples,
        subsample=cfg.bagging_fraction,
        subsample_freq=1,
        n_jobs=cfg.threads,
        random_state=cfg.seed,
        deterministic=True,
        force_row_wise=True,
        verbosity=-1,
    )
