"""The demand forecast check (issue #61), one function for every source: the unit panel, each
method's forecast of every forecast week made from the weeks before it, and the scores over
all cell-weeks and over promoted ones.

Methods: the seasonal-naive forecast (MASE's scale), no sale at all (what WAPE rewards on
intermittent cells: its WAPE is exactly 1), moving averages, LightGBM through mlforecast
(``gbm``) and a Poisson fixed-effects model through pyfixest (``fixed_effects``). The world
model's forecast (trips × basket × quantity) joins the same frame when it is built.

The run (``pipeline/demand_run``) goes a chunk of products at a time (``cell_chunks``), with
the libraries fitted beforehand on a seeded sample of cells (``fit_libraries``) and the scores
gathered as per-product sums (``ScoreSums``), so its memory follows a chunk, not the source.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import polars as pl

from retailsim_core.calendar import SourceCalendar
from retailsim_core.demand.cells.baselines import moving_average, season_of, seasonal_naive
from retailsim_core.demand.cells.known_inputs import with_exogenous
from retailsim_core.demand.cells.scores import (
    mase_scale,
    product_sums,
    scale_sums,
    scores_from_sums,
)
from retailsim_core.demand.cells.unit_panel import (
    CELL,
    KEY,
    padded_panel,
    promotion_kind,
    unit_panel,
    weekly_units,
)
from retailsim_core.demand.libraries.fixed_effects import FixedEffectsConfig, fe_forecasts, fit_fe
from retailsim_core.demand.libraries.gbm import (
    GbmConfig,
    draw_cells,
    first_week_read,
    fit_gbm,
    predict_gbm,
)
from retailsim_core.demand.world.quantity import QuantityConfig

WINDOWS = (4, 13)  # a month and a quarter of weeks
REFERENCE = "seasonal_naive"
LIBRARY_METHODS = ("lightgbm_l1", "lightgbm_tweedie", "poisson_fe")
FRAME_COLUMNS = (*KEY, "promotion", "observed_units")  # every other column is a method


@dataclass(frozen=True)
class DemandConfig:
    gbm: GbmConfig = field(default_factory=GbmConfig)
    fixed_effects: FixedEffectsConfig = field(default_factory=FixedEffectsConfig)
    quantity: QuantityConfig = field(default_factory=QuantityConfig)
    max_chunk_cells: int = 150_000  # cells forecast at once: memory grows with a chunk, not
    # with the source (the real LGSR sample has 865,031 cells, 67 million cell-weeks)
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


def cell_chunks(units: pl.LazyFrame, *, first_forecast_week: int, max_cells: int) -> pl.LazyFrame:
    """product_id, chunk: the products with a cell that sold before the forecast weeks, in
    chunks of about ``max_cells`` cells (a product's cells stay together, so every score's
    per-product sums come from one chunk)."""
    return (
        units.filter((pl.col("week") < first_forecast_week) & (pl.col("units") > 0))
        .group_by("product_id")
        .agg(cells=pl.col("store_id").n_unique())
        .sort("product_id")
        .select("product_id", chunk=(pl.col("cells").cum_sum() - 1) // max_cells)
    )


def sample_cells(units: pl.LazyFrame, *, first_forecast_week: int, n: int, seed: int):
    """Up to ``n`` cells (product_id, store_id) that sold before the forecast weeks, drawn with
    ``seed`` from the sorted cells; a draw's first k rows are a draw of k."""
    cells = (
        units.filter((pl.col("week") < first_forecast_week) & (pl.col("units") > 0))
        .select(*CELL)
        .unique()
        .sort(*CELL)
        .collect()
    )
    return cells.sample(min(n, cells.height), seed=seed, shuffle=True)


def library_frame(
    raw: pl.LazyFrame,
    plan: pl.LazyFrame,
    calendar: SourceCalendar,
    *,
    first_forecast_week: int,
    last_week: int,
    cfg: DemandConfig,
    cells: pl.LazyFrame | None = None,
) -> pl.LazyFrame:
    """The padded panel the libraries fit on (``padded_panel``) with the inputs known before
    each week (``known_inputs``), from the first week either library reads; only ``cells``
    (product_id, store_id) where given, their products' prices still read from all of ``raw``."""
    season = season_of(first_forecast_week)
    start = min(
        first_week_read(first_forecast_week, season, cfg.gbm),
        first_forecast_week - cfg.fixed_effects.train_weeks,
    )
    units = weekly_units(raw)
    if cells is not None:
        units = units.join(cells, on=list(CELL), how="semi")
    panel = unit_panel(units, plan, first_forecast_week=first_forecast_week, last_week=last_week)
    return padded_panel(panel, start_week=start, last_week=last_week).pipe(
        with_exogenous,
        raw,
        calendar,
        first_week=start,
        first_forecast_week=first_forecast_week,
        last_week=last_week,
    )


@dataclass(frozen=True)
class FittedLibraries:
    forecaster: object  # mlforecast's MLForecast with both objectives' trees (``fit_gbm``)
    fixed_effects: dict  # ``fit_fe``'s coefficients
    seconds: dict  # each fit's wall time


def fit_libraries(
    sample: pl.DataFrame, *, first_forecast_week: int, cfg: DemandConfig
) -> FittedLibraries:
    """Both libraries fitted on ``sample`` (a ``library_frame`` of sampled cells): the fixed
    effects' coefficients on all of it, the trees on up to ``max_train_cells`` of its cells."""
    season = season_of(first_forecast_week)
    start = time.perf_counter()
    trees = sample.filter(pl.col("cell").is_in(draw_cells(sample["cell"], cfg.gbm).implode()))
    forecaster = fit_gbm(trees, first_forecast_week=first_forecast_week, season=season,
                         cfg=cfg.gbm)  # fmt: skip
    middle = time.perf_counter()
    fe = fit_fe(sample, first_forecast_week=first_forecast_week, cfg=cfg.fixed_effects)
    seconds = {"lightgbm_fit": round(middle - start, 1),
               "poisson_fe_fit": round(time.perf_counter() - middle, 1)}  # fmt: skip
    return FittedLibraries(forecaster, fe, seconds)


def with_library_forecasts(
    frame: pl.DataFrame,
    library: pl.DataFrame,
    fitted: FittedLibraries,
    *,
    first_forecast_week: int,
    cfg: DemandConfig,
) -> pl.DataFrame:
    """``frame``'s forecast-week rows with the LIBRARY_METHODS' forecasts of ``library`` (the
    same cells' ``library_frame``)."""
    kwargs = dict(first_forecast_week=first_forecast_week)
    gbm = predict_gbm(fitted.forecaster, library, season=season_of(first_forecast_week),
                      cfg=cfg.gbm, **kwargs)  # fmt: skip
    fe = fe_forecasts(library, fitted.fixed_effects, cfg=cfg.fixed_effects, **kwargs)
    cells = library.select("cell", *CELL).unique("cell")
    forecasts = gbm.join(fe, on=["cell", "week"], how="full", coalesce=True).join(cells, on="cell")
    test = frame.filter(pl.col("week") >= first_forecast_week)
    test = test.join(forecasts.drop("cell"), on=KEY, how="left")
    missing = test.select(pl.any_horizontal(pl.col(LIBRARY_METHODS).is_null()).sum()).item()
    if missing:
        raise ValueError(f"{missing} forecast cell-weeks have no library forecast")
    return test


@dataclass
class ScoreSums:
    """What the scores are made of, gathered chunk by chunk."""

    methods: list[str]
    scale_abs: float = 0.0
    scale_rows: int = 0
    parts: dict = field(default_factory=lambda: {"all": [], "promoted": []})

    def add(self, history: pl.DataFrame, test: pl.DataFrame) -> None:
        """A chunk's rows before the forecast weeks and its forecast rows (observed_units, a
        column per method)."""
        abs_sum, rows = scale_sums(history.rename({"observed_units": "units"}))
        self.scale_abs, self.scale_rows = self.scale_abs + abs_sum, self.scale_rows + rows
        test = test.rename({"observed_units": "units"})
        for part, rows in (("all", test), ("promoted", test.filter(pl.col("promotion") != "none"))):
            if rows.height:
                self.parts[part].append(product_sums(rows, self.methods))

    def scores(self, *, n_boot: int, seed: int) -> dict:
        scale = mase_scale(self.scale_abs, self.scale_rows)
        kwargs = dict(reference=REFERENCE, n_boot=n_boot, seed=seed)
        out = {"mase_scale": scale}
        for part, sums in self.parts.items():
            per_product = pl.concat(sums) if sums else None
            out[f"{'cell_weeks' if part == 'all' else 'promoted_cell_weeks'}"] = (
                int(per_product["rows"].sum()) if per_product is not None else 0
            )
            if per_product is not None:
                out[part] = scores_from_sums(per_product, self.methods, scale, **kwargs)
        return out


def score(frame: pl.DataFrame, *, first_forecast_week: int, n_boot: int, seed: int) -> dict:
    """Scores of one frame (every forecast column a method): over the forecast weeks' rows,
    all and promoted, with the MASE scale from the weeks before them."""
    methods = [c for c in frame.columns if c not in FRAME_COLUMNS]
    sums = ScoreSums(methods)
    before = pl.col("week") < first_forecast_week
    sums.add(frame.filter(before), frame.filter(~before))
    return sums.scores(n_boot=n_boot, seed=seed)
