"""The demand forecast check (issue #61), one function for every source: the unit panel, each
method's forecast of every forecast week made from the weeks before it, and the scores over
all cell-weeks and over promoted ones.

Methods so far: the seasonal-naive forecast (MASE's scale) and moving averages. The world
model's forecast (trips × basket × quantity) and the forecasting libraries' baselines join the
same frame as they are built.
"""

from __future__ import annotations

import polars as pl

from retailsim_core.demand.baselines import moving_average, season_of, seasonal_naive
from retailsim_core.demand.scores import forecast_scores, naive_scale
from retailsim_core.demand.unit_panel import KEY, promotion_kind, unit_panel, weekly_units

WINDOWS = (4, 13)  # a month and a quarter of weeks
REFERENCE = "seasonal_naive"


def methods() -> list[str]:
    return [REFERENCE, *(f"moving_average_{w}" for w in WINDOWS)]


def forecast_frame(
    raw: pl.LazyFrame, plan: pl.LazyFrame, *, first_forecast_week: int, last_week: int
) -> pl.LazyFrame:
    """Every panel row with its promotion kind and each method's forecast; a forecast of week
    W reads the cell's rows before W only (``baselines``)."""
    lf = unit_panel(
        weekly_units(raw), plan, first_forecast_week=first_forecast_week, last_week=last_week
    ).pipe(seasonal_naive, season=season_of(first_forecast_week))
    for window in WINDOWS:
        lf = lf.pipe(moving_average, window=window)
    return lf.with_columns(promotion_kind()).select(
        *KEY, "promotion", pl.col("units").alias("observed_units"), *methods()
    )


def score(frame: pl.DataFrame, *, first_forecast_week: int, n_boot: int, seed: int) -> dict:
    """Scores over the forecast weeks' rows, all and promoted, with the MASE scale from the
    weeks before them."""
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
        "all": forecast_scores(test, methods(), scale, **kwargs),
    }
    if promoted.height:
        out["promoted"] = forecast_scores(promoted, methods(), scale, **kwargs)
    return out
