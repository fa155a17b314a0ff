"""``world_model_demand``: the world model's unit forecast of every ``demand_forecast`` cell-week
(``demand/world/world_demand.py``), scored beside the forecasters' baselines on the same rows.

Reads ``demand_forecast`` (its test cell-weeks, their baselines' forecasts and scores),
``trip_forecast`` (expected trips and store shares), the trips, raw lines, and the models: each
week's ``model_refresh`` of the week before (D111) where every one is published, else the
trained checkpoint. Writes ``world_model_demand.parquet`` (each cell-week's observed units,
the model's expected buyers, mean and median forecasts), the inputs a plan of the test weeks is
forecast with (``plan_forecast.DemandInputs``: the forecast contexts, units per line, the
quantity fit and calibration factor) and ``scores.json`` (every method's
WAPE, bias, MASE, RMSE, chain WAPE, all and promoted, with each method's paired WAPE
difference to the world model's; the calibration; the models used).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import polars as pl

from retailsim_core.datasets.tensors import TensorConfig
from retailsim_core.datasets.tokens import ProductVocab
from retailsim_core.demand.cells.check import FRAME_COLUMNS
from retailsim_core.demand.cells.scores import product_sums, scores_from_sums
from retailsim_core.demand.world.forecast_lift import lift_check
from retailsim_core.demand.world.plan_forecast import DemandInputs
from retailsim_core.demand.world.shopper_units import shopper_units
from retailsim_core.demand.world.world_demand import (
    forecast_contexts,
    line_quantities,
    realized_contexts,
    world_forecasts,
)
from retailsim_core.pipeline.model_refresh import week_models
from retailsim_core.pipeline.readers.serving_inputs import load_serving_data
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.io import atomic_write_parquet
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import CHECKPOINT_TABLE, RAW_TABLE, TRIPS_TABLE
from retailsim_core.training.checkpoints.checkpoint import read_json, write_json
from retailsim_core.training.checkpoints.week_models import WeekModels

WORLD = ("world_model", "world_model_median")
NOT_FORECASTS = ("quantity", "world_model_buyers", "world_model_no_promotion", "poisson_fe_off")


def run_world_demand(
    warehouse: Warehouse,
    split: TemporalSplit,
    folder: Path,
    *,
    demand: Path,
    trips: Path,
    n_boot: int = 500,
    seed: int = 0,
) -> dict:
    """Forecast ``demand``'s test cell-weeks with the world model (``trips``: the trip
    forecast's folder); write and return the scores (``seconds`` included)."""
    start = time.perf_counter()
    first = split.valid_end + 1
    test = pl.read_parquet(demand / "demand_forecast.parquet")
    demand_scores = read_json(demand / "scores.json")
    weeks = [first - 1, *sorted(test["week"].unique().to_list())]  # calibration, test weeks
    contexts = _contexts(warehouse, trips, first)
    config = read_json(warehouse.table_dir(CHECKPOINT_TABLE) / "config.json")
    data, _ = load_serving_data(warehouse, weeks, TensorConfig(**config["tensors"]))
    models, model_ids = _models(warehouse, weeks, data.vocab)
    raw = warehouse.scan(RAW_TABLE).select("product_id", "week", "quantity")
    lines = line_quantities(raw, first_forecast_week=first).collect()
    quantity_fit = demand_scores["quantity"]
    means = data.vocab.frame().join(lines, on="product_id", how="left")
    per_token = np.zeros(data.vocab.size)  # (V,) indexed by token: [PAD] and specials hold none
    per_token[means["token"].to_numpy()] = (
        means["mean_quantity"].fill_null(quantity_fit["mean_quantity"]).to_numpy()
    )
    promoted = test.filter(pl.col("promotion") != "none")
    units = shopper_units(models, data, contexts, test, per_token, promoted=promoted,
                          coefficients=quantity_fit["coefficients"])  # fmt: skip
    observed = (
        raw.filter(pl.col("week") == first - 1)
        .join(data.vocab.frame().lazy().select("product_id"), on="product_id", how="semi")
        .select(pl.col("quantity").sum())
        .collect()
        .item()
    )
    model_units = units.totals[first - 1]
    factor = float(observed) / model_units if model_units > 0 else 1.0
    frame = world_forecasts(test, lines, quantity_fit, units.buyers, units.buyers_unpromoted,
                            units.depth, factor=factor)  # fmt: skip
    scores = _scores(frame, demand_scores["mase_scale"], n_boot=n_boot, seed=seed)
    pairs = {"world_model": ("world_model", "world_model_no_promotion")}
    if "poisson_fe" in demand_scores:
        frame = frame.with_columns(poisson_fe_off=_fe_unpromoted(demand_scores["poisson_fe"]))
        pairs["poisson_fe"] = ("poisson_fe", "poisson_fe_off")
    scores["promotion_lift"] = lift_check(frame, pairs, n_boot=n_boot, seed=seed)
    folder.mkdir(parents=True, exist_ok=True)
    keep = [*FRAME_COLUMNS, "quantity", "world_model_buyers", *WORLD, "world_model_no_promotion"]
    atomic_write_parquet(frame.select(keep), folder / "world_model_demand.parquet")
    DemandInputs(  # what the service forecasts a plan of these weeks with
        contexts.filter(pl.col("week") >= first), lines, quantity_fit["coefficients"],
        float(quantity_fit["mean_quantity"]), factor,
    ).write(folder)  # fmt: skip
    scores |= {
        "calibration": {"week": first - 1, "observed_units": observed,
                        "model_units": model_units, "factor": factor},
        "contexts": contexts.filter(pl.col("week") >= first).height,
        "models": model_ids,
        "test_weeks": [weeks[1], weeks[-1]],
        "seconds": round(time.perf_counter() - start, 1),
    }  # fmt: skip
    write_json(folder / "scores.json", scores)
    return scores


def _contexts(warehouse: Warehouse, trips: Path, first: int) -> pl.DataFrame:
    """The calibration week's realized trips of known customers, then the test weeks' forecast
    contexts (``trips``: the trip forecast's folder)."""
    trip_rows = warehouse.scan(TRIPS_TABLE).select(
        "customer_id", "week", "store_id", "shop_date", "shop_hour"
    )
    forecast = forecast_contexts(
        pl.scan_parquet(trips / "trip_forecast.parquet"),
        pl.scan_parquet(trips / "store_shares.parquet"),
        trip_rows,
        first_forecast_week=first,
        first_monday=warehouse.calendar.first_monday,
    )
    return pl.concat([realized_contexts(trip_rows, first - 1), forecast]).collect()


def _models(warehouse: Warehouse, weeks: list[int], vocab: ProductVocab) -> tuple[WeekModels, dict]:
    """(week -> model, one in memory; week -> checkpoint id): each week's refresh of the week
    before where all are published (D111), else the trained checkpoint for every week; a model
    of another vocabulary than the warehouse's is refused."""
    folders = week_models(warehouse, weeks) or dict.fromkeys(
        weeks, warehouse.table_dir(CHECKPOINT_TABLE)
    )
    models = WeekModels(folders, vocab)
    return models, {str(w): i for w, i in models.ids.items()}


def _scores(frame: pl.DataFrame, scale: float, *, n_boot: int, seed: int) -> dict:
    """Every method's scores (the baselines' and the world model's) on the same rows, all and
    promoted; each method's paired WAPE differences to the world model's two forecasts."""
    methods = [c for c in frame.columns if c not in (*FRAME_COLUMNS, *NOT_FORECASTS)]
    rows = frame.rename({"observed_units": "units"})
    out = {"cell_weeks": frame.height, "mase_scale": scale}
    for part, part_rows in (
        ("all", rows),
        ("promoted", rows.filter(pl.col("promotion") != "none")),
    ):
        if part_rows.height == 0:
            continue
        out[part] = scores_from_sums(product_sums(part_rows, methods), methods, scale,
                                     reference=WORLD, n_boot=n_boot, seed=seed)  # fmt: skip
    out["promoted_cell_weeks"] = int((frame["promotion"] != "none").sum())
    return out


def _fe_unpromoted(fit: dict) -> pl.Expr:
    """The fixed-effects forecast with its plan terms (display, mailer, both) taken out: its
    own promotion counterfactual."""
    coef = {k: v or 0.0 for k, v in fit["coefficients"].items()}
    display, mailer = (pl.col("promotion").str.contains(k).cast(pl.Float64)
                       for k in ("display", "mailer"))  # fmt: skip
    plan = (display * coef.get("display", 0.0) + mailer * coef.get("mailer", 0.0)
            + display * mailer * coef.get("display_mailer", 0.0))  # fmt: skip
    return pl.col("poisson_fe") * (-plan).exp()
