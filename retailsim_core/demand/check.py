"""The demand forecast check (issue #61), one function for every source: the unit panel, each
method's forecast of every forecast week made from the weeks before it, and the scores over
all cell-weeks and over promoted ones.

Methods: the seasonal-naive forecast (MASE's scale), no sale at all (what WAPE rewards on
intermittent cells: its WAPE is exactly 1), moving averages, LightGBM through mlforecast
(``gbm``) and a Poisson fixed-effects model through pyfixest (``fixed_effects``). The world
model's forecast (trips × basket × quantity) joins the same frame when it is built.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import polars as pl

from retailsim_core.calendar import SourceCalendar
from retailsim_core.demand.baselines import moving_average, season_of, seasonal_naive
from retailsim_core.demand.fixed_effects import FixedEffectsConfig, poisson_fe_forecasts
from retailsim_core.demand.gbm import GbmConfig, first_week_read, gbm_forecasts
from retailsim_core.demand.known_inputs import with_exogenous
from retailsim_core.demand.quantity import QuantityConfig
from retailsim_core.demand.scores import forecast_scores, naive_scale
from retailsim_core.demand.unit_panel import (
    CELL,
    KEY,
    padded_panel,
    promotion_kind,
    unit_panel,
    weekly_units,
)

WINDOWS = (4, 13)  # a month and a quarter of weeks
REFERENCE = "seasonal_naive"
LIBRARY_METHODS = ("lightgbm_l1", "lightgbm_tweedie", "poisson_fe")


@dataclass(frozen=True)
class DemandConfig:
    gbm: GbmConfig = field(default_factory=GbmConfig)
    fixed_effects: FixedEffectsConfig = field(default_factory=FixedEffectsConfig)
    quantity: QuantityConfig = field(default_factory=QuantityConfig)
    libraries: bool = True  # False: the counting methods only (tests of the frame)


def counting_methods() -> list[str]:
    return [REFERENCE, "no_sale", *(f"moving_average_{w}" for w in WINDOWS)]


def forecast_frame(
    raw: pl.LazyFrame, plan: pl.LazyFrame, *, first_forecast_week: int, last_week: int
) -> pl.LazyFrame:
    """Every panel row with its promotion kind and each counting method's forecast; a forecast
    of week W reads the cell's rows before W only (``baselines``)."""
    lf = unit_panel(
        weekly_units(raw), plan, first_forecast_week=first_forecast_week, last_week=last_week
    ).pipe(seasonal_naive, season=season_of(first_forecast_week))
    for window in WINDOWS:
        lf = lf.pipe(moving_average, window=window)
    return lf.with_columns(promotion_kind(), no_sale=pl.lit(0.0)).select(
        *KEY, "promotion", pl.col("units").alias("observed_units"), *counting_methods()
    )


def library_frame(
    raw: pl.LazyFrame,
    plan: pl.LazyFrame,
    calendar: SourceCalendar,
    *,
    first_forecast_week: int,
    last_week: int,
    cfg: DemandConfig,
) -> pl.LazyFrame:
    """The padded panel the libraries fit on (``padded_panel``) with the inputs known before
    each week (``known_inputs``), from the first week either library reads."""
    season = season_of(first_forecast_week)
    start = min(
        first_week_read(first_forecast_week, season, cfg.gbm),
        first_forecast_week - cfg.fixed_effects.train_weeks,
    )
    panel = unit_panel(
        weekly_units(raw), plan, first_forecast_week=first_forecast_week, last_week=last_week
    )
    return padded_panel(panel, start_week=start, last_week=last_week).pipe(
        with_exogenous,
        raw,
        calendar,
        first_week=start,
        first_forecast_week=first_forecast_week,
        last_week=last_week,
    )


def with_library_forecasts(
    frame: pl.DataFrame, library: pl.DataFrame, *, first_forecast_week: int, cfg: DemandConfig
) -> tuple[pl.DataFrame, dict]:
    """``frame`` with the LIBRARY_METHODS' forecasts on its forecast-week rows (null before
    them: the weeks the MASE scale reads); the fixed-effects fit's coefficients."""
    season = season_of(first_forecast_week)
    start = time.perf_counter()
    gbm = gbm_forecasts(library, first_forecast_week=first_forecast_week, season=season,
                        cfg=cfg.gbm)  # fmt: skip
    middle = time.perf_counter()
    fe, fit = poisson_fe_forecasts(library, first_forecast_week=first_forecast_week,
                                   cfg=cfg.fixed_effects)  # fmt: skip
    seconds = {"lightgbm": round(middle - start, 1),
               "poisson_fe": round(time.perf_counter() - middle, 1)}  # fmt: skip
    cells = library.select("cell", *CELL).unique("cell")
    forecasts = gbm.join(fe, on=["cell", "week"], how="full", coalesce=True).join(cells, on="cell")
    test = frame.filter(pl.col("week") >= first_forecast_week)
    test = test.join(forecasts.drop("cell"), on=KEY, how="left")
    missing = test.select(pl.any_horizontal(pl.col(LIBRARY_METHODS).is_null()).sum()).item()
    if missing:
        raise ValueError(f"{missing} forecast cell-weeks have no library forecast")
    history = frame.filter(pl.col("week") < first_forecast_week)
    return pl.concat([history, test], how="diagonal"), {"poisson_fe": fit, "seconds_by": seconds}


def score(frame: pl.DataFrame, *, first_forecast_week: int, n_boot: int, seed: int) -> dict:
    """Scores over the forecast weeks' rows, all and promoted, with the MASE scale from the
    weeks before them; every forecast column of ``frame`` is a method."""
    methods = [c for c in frame.columns if c not in (*KEY, "promotion", "observed_units")]
    frame = frame.rename({"observed_units": "units"})
    history = frame.filter(pl.col("week") < first_forecast_week)
    test = frame.filter(pl.col("week") >= first_forecast_week)
    scale = naive_scale(history)
    promoted = test.filter(pl.col("promotion") != "none")
    kwargs = dict(reference=REFERENCE, n_boot=n_boot, seed=seed)
    out = {
        "mase_scale": scale,
        "cell_weeks": test.height,
        "promoted_cell_weeks": promoted.height,
        "all": forecast_scores(test, methods, scale, **kwargs),
    }
    if promoted.height:
        out["promoted"] = forecast_scores(promoted, methods, scale, **kwargs)
    return out
