"""The inputs known before a week, the padded panel, and the forecasting libraries' baselines
(LightGBM through mlforecast, pyfixest's Poisson fixed effects) on small planted panels."""

import datetime as dt

import numpy as np
import polars as pl
import pytest

from retailsim_core.calendar import SourceCalendar
from retailsim_core.demand.cells.known_inputs import EXOGENOUS, calendar_frame, with_exogenous
from retailsim_core.demand.cells.unit_panel import padded_panel
from retailsim_core.demand.libraries.fixed_effects import FixedEffectsConfig, poisson_fe_forecasts
from retailsim_core.demand.libraries.gbm import GbmConfig, gbm_forecasts

CAL = SourceCalendar("test", dt.date(2016, 12, 26), 60, 40, 45, holidays="us")


def _panel(rows) -> pl.LazyFrame:
    return pl.DataFrame(
        rows, orient="row",
        schema={"product_id": pl.String, "store_id": pl.String, "week": pl.Int16,
                "units": pl.Float64, "display": pl.Boolean, "mailer": pl.Boolean},
    ).lazy()  # fmt: skip


def _raw(rows) -> pl.LazyFrame:
    return pl.DataFrame(
        rows, orient="row",
        schema={"product_id": pl.String, "week": pl.Int16, "quantity": pl.Int32,
                "spend": pl.Float64},
    ).lazy()  # fmt: skip


def test_the_calendar_inputs_count_holidays_and_wrap_the_year():
    cal = calendar_frame(CAL, range(1, 54)).collect()
    # week 1 (Mon 2016-12-26 to Sun 2017-01-01) holds New Year's Day
    assert cal.filter(pl.col("week") == 1)["holidays"].item() == 1
    thanksgiving = CAL.week_of_date(dt.date(2017, 11, 23))
    assert cal.filter(pl.col("week") == thanksgiving)["holidays"].item() == 1
    # the same week of the next year sits where its predecessor did on the circle
    a, b = cal.filter(pl.col("week") == 2), cal.filter(pl.col("week") == 54 - 2 + 1)
    assert a["week_cos"].item() == pytest.approx(b["week_cos"].item(), abs=0.02)
    assert (cal["week_sin"] ** 2 + cal["week_cos"] ** 2).to_numpy() == pytest.approx(1.0)


def test_a_price_index_reads_only_prices_of_earlier_weeks():
    panel = _panel([("A", "S", w, 1.0, False, False) for w in range(1, 7)])
    raw = _raw([("A", 1, 1, 2.0), ("A", 2, 1, 2.0), ("A", 3, 2, 2.0), ("A", 5, 1, 0.5)])
    lf = with_exogenous(panel, raw, CAL, first_week=1, first_forecast_week=5, last_week=6)
    index = lf.collect()["price_index"].to_list()
    # typical price before week 5: median(2, 2, 1) = 2; week 4 reads week 3's 1.0; week 6 week 5's
    assert index == pytest.approx([1.0, 1.0, 1.0, 0.5, 0.5, 0.25])
    later = _raw([("A", 1, 1, 2.0), ("A", 2, 1, 2.0), ("A", 3, 2, 2.0), ("A", 5, 1, 9.0)])
    changed = with_exogenous(
        panel, later, CAL, first_week=1, first_forecast_week=5, last_week=6
    ).collect()
    assert changed["price_index"].to_list()[:5] == pytest.approx(index[:5])
    assert set(EXOGENOUS) <= set(changed.columns)


def test_the_padded_panel_holds_every_cell_on_every_week_zeros_before_its_first_sale():
    panel = _panel([("A", "S", 3, 2.0, True, False), ("A", "S", 4, 0.0, False, False),
                    ("B", "S", 4, 1.0, False, True)])  # fmt: skip
    out = padded_panel(panel, start_week=2, last_week=4).collect()
    got = out.select("cell", "product_id", "week", "units", "display", "sold_before").rows()
    assert got == [
        (0, "A", 2, 0.0, False, False),
        (0, "A", 3, 2.0, True, False),  # the first sale: not a week after one
        (0, "A", 4, 0.0, False, True),
        (1, "B", 2, 0.0, False, False),
        (1, "B", 3, 0.0, False, False),
        (1, "B", 4, 1.0, False, False),
    ]


def _planted(n_cells=120, n_weeks=60, effect=1.0, seed=0) -> pl.DataFrame:
    """Poisson units with a cell level and a display effect of exp(``effect``)."""
    rng = np.random.default_rng(seed)
    level = rng.gamma(2.0, 1.0, n_cells)
    display = rng.random((n_cells, n_weeks)) < 0.15
    units = rng.poisson(level[:, None] * np.exp(effect * display))
    weeks = np.arange(1, n_weeks + 1)
    return pl.DataFrame(
        {
            "cell": np.repeat(np.arange(n_cells, dtype=np.uint32), n_weeks),
            "product_id": np.repeat([f"P{c}" for c in range(n_cells)], n_weeks),
            "store_id": "S",
            "week": np.tile(weeks, n_cells).astype(np.int16),
            "units": units.ravel().astype(np.float64),
            "sold_before": np.tile(weeks > 1, n_cells),
            "display": display.ravel(),
            "mailer": False,
            "week_sin": np.tile(np.sin(weeks / 9), n_cells),
            "week_cos": np.tile(np.cos(weeks / 9), n_cells),
            "holidays": np.int8(0),
            "price_index": 1.0,
        }
    )


def test_the_poisson_fixed_effects_recover_the_planted_display_effect():
    frame = _planted(effect=1.0)
    out, fit = poisson_fe_forecasts(frame, first_forecast_week=51, cfg=FixedEffectsConfig(40))
    assert fit["coefficients"]["display"] == pytest.approx(1.0, abs=0.1)
    assert fit["coefficients"]["holidays"] is None  # no variation: dropped, not invented
    assert out.height == 120 * 10 and out["week"].min() == 51
    # a displayed week is forecast exp(beta) times the cell's plain week
    one = out.join(frame.select("cell", "week", "display"), on=["cell", "week"])
    by = one.group_by("cell").agg(
        shown=pl.col("poisson_fe").filter("display").mean(),
        plain=pl.col("poisson_fe").filter(~pl.col("display")).mean(),
    )
    ratio = by.drop_nulls().select(pl.col("shown") / pl.col("plain"))["shown"].to_numpy()
    assert len(ratio) > 10
    np.testing.assert_allclose(ratio, np.exp(fit["coefficients"]["display"]), rtol=1e-9)


def test_the_fixed_effects_are_the_fits_own_and_a_cell_without_sales_is_forecast_zero():
    import pyfixest as pf

    frame = _planted(n_cells=30, n_weeks=30).with_columns(
        units=pl.when(pl.col("cell") == 3).then(0.0).otherwise(pl.col("units"))
    )
    out, _ = poisson_fe_forecasts(frame, first_forecast_week=21, cfg=FixedEffectsConfig(20))
    assert out.filter(pl.col("cell") == 3)["poisson_fe"].to_list() == [0.0] * 10
    # the closed-form effects give the same forecasts as pyfixest's own predictions
    fit_rows = frame.filter(pl.col("week").is_between(2, 20))
    model = pf.fepois("units ~ display | cell", data=fit_rows.to_pandas(), vcov="iid")
    test = frame.filter((pl.col("week") >= 21) & (pl.col("cell") != 3)).to_pandas()
    expected = np.asarray(model.predict(newdata=test, type="response"))
    got = out.filter(pl.col("cell") != 3).sort("cell", "week")["poisson_fe"].to_numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4)


def test_lightgbm_forecasts_each_week_from_the_weeks_before_it_and_learns_the_plan():
    frame = _planted(effect=1.5)
    cfg = GbmConfig(train_weeks=30, n_estimators=60, num_leaves=7, min_child_samples=20)
    out = gbm_forecasts(frame, first_forecast_week=51, season=1, cfg=cfg)
    assert out.height == 120 * 10 and set(out["week"]) == set(range(51, 61))
    again = gbm_forecasts(frame, first_forecast_week=51, season=1, cfg=cfg)
    assert out.equals(again)  # same seed, same forecasts
    joined = out.join(frame, on=["cell", "week"])
    shown = joined.group_by("display").agg(pl.col("lightgbm_tweedie").mean()).sort("display")
    assert shown["lightgbm_tweedie"][1] > 2.5 * shown["lightgbm_tweedie"][0]  # exp(1.5) = 4.5
    # week 55's forecasts never read week 55 or later
    later = frame.with_columns(
        units=pl.when(pl.col("week") >= 55).then(pl.col("units") * 50).otherwise(pl.col("units"))
    )
    moved = gbm_forecasts(later, first_forecast_week=51, season=1, cfg=cfg)
    week = pl.col("week") <= 55
    assert moved.filter(week).sort("cell", "week").equals(out.filter(week).sort("cell", "week"))
    assert not moved.equals(out)
