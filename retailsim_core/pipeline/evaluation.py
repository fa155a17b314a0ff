"""``evaluation_report``: the world model against every baseline on the same test baskets.

Validation weeks tune the baselines (TIFU-KNN and UP-CF@r grids, the co-purchase weight,
SASRec/BERT4Rec epochs); test weeks are scored once. Outputs in the table folder:
``metrics.json`` ({task: {slice: {method: {metric: value}}}}), ``intervals.json`` (95% customer
bootstrap intervals, and of each method's difference from the world model), ``metrics.parquet``
(long), ``calibration.parquet``, ``tuning.json`` and the self-contained ``report.html``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import torch

from retailsim_core.evaluation import baselines as bl
from retailsim_core.evaluation.metrics import next_basket_metrics, truth_matrix
from retailsim_core.evaluation.observed_response import observed_check
from retailsim_core.evaluation.oracle import honest_oracle_scorer, oracle_scorer
from retailsim_core.evaluation.price_response import price_response, simulation_check
from retailsim_core.evaluation.report_html import render_report
from retailsim_core.evaluation.run import (
    METHOD_INPUTS,
    EvalConfig,
    aux_calibration,
    intervals,
    nested_metrics,
    score_rows,
    slices,
    subsample,
    world_model_masked_scorer,
    world_model_scorer,
)
from retailsim_core.io import atomic_write_parquet, atomic_write_text
from retailsim_core.pipeline.baseline_tuning import tune_baselines
from retailsim_core.pipeline.embeddings import product_categories
from retailsim_core.pipeline.features import PRICE_FEATURES_TABLE
from retailsim_core.pipeline.graph import load_graph
from retailsim_core.pipeline.prices import PRICES_TABLE, promotion_cells
from retailsim_core.pipeline.samples import SAMPLES_TABLE
from retailsim_core.pipeline.truth import bind_truth
from retailsim_core.pipeline.world_model import CHECKPOINT_TABLE, load_model, load_model_inputs
from retailsim_core.simulation import expected_basket_size
from retailsim_core.split import TemporalSplit
from retailsim_core.tensors import TensorConfig, TrainingSet
from retailsim_core.warehouse import Warehouse

REPORT_TABLE = "evaluation_report"


def evaluate(
    warehouse: Warehouse,
    split: TemporalSplit,
    truth_dir: Path | None,
    cfg: EvalConfig = EvalConfig(),
    log: Callable[[str], None] = lambda _: None,
    checkpoint: Path | None = None,
    folder: Path | None = None,
) -> dict:
    """Tune the baselines on validation weeks, score every method on the test baskets, write the
    report (default folders: the warehouse's ``trained_checkpoint`` and ``evaluation_report``).
    ``truth_dir``: the generator's planted truth (adds the oracles and the planted-elasticity
    check when it was generated with the ingested files, else skipped with a note), or None."""
    start = time.perf_counter()
    binding = bind_truth(truth_dir, warehouse)  # first: a mismatch is said before any work
    truth_dir, oracle_note = binding.truth_dir, binding.note
    if oracle_note:
        log(oracle_note)
    torch.manual_seed(cfg.seed)
    model, vocab, config = load_model(checkpoint or warehouse.table_dir(CHECKPOINT_TABLE))
    # Validation and test weeks only: their rows are all it scores, and the price and shelf
    # tables of the training weeks were most of its memory on real data (20 GB at 3M rows).
    inputs = load_model_inputs(
        warehouse, [w for w in warehouse.weeks(SAMPLES_TABLE) if w > split.train_end]
    )
    if inputs.vocab != vocab:
        raise ValueError(
            "the checkpoint's vocabulary differs from the warehouse's GraphSAGE products: retrain"
        )
    samples = inputs.samples.filter(pl.col("split") != "train")
    data = inputs.training_set(samples, TensorConfig(**config["tensors"]))
    split_col = samples["split"].to_numpy()
    valid_rows = subsample(
        np.flatnonzero(split_col == "validation"), cfg.max_valid_samples, cfg.seed
    )
    test_rows = subsample(np.flatnonzero(split_col == "test"), cfg.max_test_samples, cfg.seed + 1)
    trips = bl.trip_matrix(data)
    valid_day = _first_day(inputs.store.trips, split.train_end + 1)
    test_day = _first_day(inputs.store.trips, split.valid_end + 1)
    pop = {"valid": _popularity(data, trips, valid_day), "test": _popularity(data, trips, test_day)}
    categories = product_categories(warehouse, vocab)
    ctx = _context(data, samples, inputs.store, trips, categories, _mean_prices(warehouse, vocab))

    def valid_r20(scores, rows):
        truth = truth_matrix(
            data.item_tokens, data.item_starts[rows], data.item_counts[rows], vocab.size
        )
        m = next_basket_metrics(
            torch.as_tensor(scores),
            truth,
            repeat=ctx["repeat_of"](rows),
            basket_len=ctx["basket_len"][rows],
            categories=categories,
            outside=data.item_oov[rows],
        )
        return float(m["R@20"].mean())

    tuned = tune_baselines(data, trips, valid_rows, valid_day, test_day, pop, valid_r20, cfg, log)
    scorers = {
        "world_model": world_model_scorer(model),
        "world_model | given mission": world_model_scorer(model, given_mission=True),
        "G-TopFreq": lambda rows, b: bl.g_topfreq(pop["test"], len(rows)),
        "P-TopFreq": lambda rows, b: bl.p_topfreq(bl.personal_counts(data, rows, trips)),
        "GP-TopFreq": lambda rows, b: bl.gp_topfreq(
            bl.personal_counts(data, rows, trips), pop["test"]
        ),
        "Store-P-TopFreq": lambda rows, b: bl.store_p_topfreq(data, rows, trips, pop["test"]),
        "Mission-P-TopFreq": lambda rows, b: bl.mission_p_topfreq(data, rows, trips, pop["test"]),
        **tuned["scorers"],
    }
    if truth_dir is not None and (Path(truth_dir) / "config.json").exists():
        try:
            scorers["oracle"] = oracle_scorer(Path(truth_dir), samples, vocab)
            scorers["oracle (no mission)"] = honest_oracle_scorer(
                Path(truth_dir), samples, vocab, data.basket_context.hour
            )
        except (
            ValueError
        ) as err:  # a truth folder of other raw files: no oracle, said in the report
            oracle_note = f"oracle skipped: {err}"
            log(oracle_note)
    masked = {
        "world_model": world_model_masked_scorer(model),
        "P-TopFreq + co-purchase": tuned["copurchase"],
    }
    results = score_rows(data, test_rows, scorers, masked, ctx, cfg, log)
    slice_rows = slices(samples, data, results.rows, cfg.week_slices)
    metrics = nested_metrics(results, slice_rows)
    customers = samples["customer_id"].cast(pl.Categorical).to_physical().to_numpy()
    bounds = intervals(results, slice_rows, customers[results.rows], cfg)
    calibration = aux_calibration(model, data, results.rows)
    response = price_response(
        model, data, results.rows, categories, truth_dir if "oracle" in scorers else None
    )
    sim_rows = results.rows[:: max(len(results.rows) // 512, 1)][:512]
    sim_samples = samples[sim_rows]
    sim_prices = (
        warehouse.scan(PRICE_FEATURES_TABLE, sorted(set(sim_samples["week"].to_list())))
        .filter(pl.col("store_id").is_in(sim_samples["store_id"].unique().implode()))
        .collect()
    )
    simulation = simulation_check(
        model,
        data,
        sim_rows,
        sim_prices,
        sim_samples["store_id"].to_list(),
        sim_samples["week"].to_list(),
        seed=cfg.seed,
    )
    response["observed"] = observed_response(warehouse, split, model, data, results.rows, cfg.seed)
    log(
        f"elasticities for {response['context']}; simulation check {simulation['summary']}; "
        f"against held-out weeks {response['observed']}"
    )
    tuning = {
        **tuned["info"],
        "test_samples": len(test_rows),
        "validation_samples": len(valid_rows),
        "checkpoint": config["summary"],
        "simulation": simulation["summary"],
        "simulated_sizes": simulation["sizes"],
        "method_inputs": METHOD_INPUTS,
        "oracle_note": oracle_note,
        "elasticity_context": response["context"],
        "elasticity_contexts": response["contexts"],
        "planted_elasticity_correlation": response.get("planted_correlation"),
        "planted_elasticity_spearman": response.get("planted_spearman"),
        "own_elasticity_negative_share": response.get("own_negative_share"),
        "substitution": response.get("substitution"),
        "observed_response": response["observed"],
        "seconds": round(time.perf_counter() - start, 1),
    }
    write_report(
        folder or warehouse.table_dir(REPORT_TABLE), metrics, bounds, calibration, tuning, response
    )
    return {
        "metrics": metrics,
        "intervals": bounds,
        "tuning": tuning,
        "calibration": calibration,
        "price_response": response,
    }


def observed_response(
    warehouse: Warehouse,
    split: TemporalSplit,
    model,
    data: TrainingSet,
    rows: np.ndarray,
    seed: int,
) -> dict:
    """The model's own- and cross-price response against the test weeks' promotions (128 test
    contexts; the substitution edges of the product graph)."""
    weeks = [w for w in warehouse.weeks(PRICES_TABLE) if w > split.valid_end]
    if not weeks:
        return {"note": "no test week of derived_prices is materialized"}
    cells = promotion_cells(warehouse, weeks)
    batch = data[rows[:: max(len(rows) // 128, 1)][:128]]
    size = expected_basket_size(model, batch)
    return {
        "weeks": [weeks[0], weeks[-1]],
        **observed_check(
            model, batch, size, data.vocab, cells, load_graph(warehouse).edges, seed=seed
        ),
    }


def _context(data: TrainingSet, samples: pl.DataFrame, store, trips, categories, prices) -> dict:
    """What the metrics need besides scores: products bought before, the predicted basket size of
    a sample (the customer's mean trip size; the median trip for new customers), prices, spend."""
    sizes = np.diff(data.trip_offsets).astype(np.float64)
    rows = np.arange(len(samples))
    w = bl.history_weights(*bl.sample_history(data, rows))
    n = np.asarray(w.sum(1)).ravel()
    basket_len = np.where(n > 0, np.rint((w @ sizes) / np.maximum(n, 1)), np.median(sizes)).astype(
        np.int64
    )
    spend = (
        samples.join(
            store.trips.select("basket_id", "spend"),
            on="basket_id",
            how="left",
            maintain_order="left",
        )["spend"]
        .fill_null(0.0)
        .to_numpy()
    )
    return {
        "repeat_of": lambda r: (bl.personal_counts(data, r, trips) > 0).astype(np.float32),
        "basket_len": basket_len,
        "categories": categories,
        "spend": spend,
        "prices_of": lambda r: np.broadcast_to(prices, (len(r), len(prices))),
    }


def _popularity(data: TrainingSet, trips, before_day: int) -> np.ndarray:
    return np.asarray(trips[data.trip_day < before_day].sum(0)).ravel()


def _first_day(trips: pl.DataFrame, week: int) -> int:
    later = trips.filter(pl.col("week") >= week)
    return int(later["shop_date"].cast(pl.Int32).min()) if later.height else 10**9


def _mean_prices(warehouse: Warehouse, vocab) -> np.ndarray:
    """Mean week price of each token over every price-features row (for the revenue of a
    predicted basket)."""
    prices = (
        warehouse.scan(PRICE_FEATURES_TABLE)
        .group_by("product_id")
        .agg(pl.col("actual_price").mean())
        .collect()
    )
    tokens = vocab.frame().join(prices, on="product_id", how="left")
    out = np.zeros(vocab.size)
    out[tokens["token"].to_numpy()] = tokens["actual_price"].fill_null(0.0).to_numpy()
    return out


def long_metrics(metrics: dict) -> pl.DataFrame:
    rows = [
        {"task": t, "slice": s, "method": m, "metric": k, "value": float(v)}
        for t, by_slice in metrics.items()
        for s, by_method in by_slice.items()
        for m, vals in by_method.items()
        for k, v in vals.items()
    ]
    return pl.DataFrame(
        rows,
        schema={
            "task": pl.String,
            "slice": pl.String,
            "method": pl.String,
            "metric": pl.String,
            "value": pl.Float64,
        },
    )


def write_report(
    folder: Path,
    metrics: dict,
    bounds: dict,
    calibration: pl.DataFrame,
    tuning: dict,
    response: dict,
) -> None:
    atomic_write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n", folder / "metrics.json")
    atomic_write_text(
        json.dumps(bounds, indent=2, sort_keys=True) + "\n", folder / "intervals.json"
    )
    atomic_write_parquet(long_metrics(metrics), folder / "metrics.parquet")
    atomic_write_parquet(calibration, folder / "calibration.parquet")
    atomic_write_text(
        json.dumps(tuning, indent=2, sort_keys=True, default=str) + "\n", folder / "tuning.json"
    )
    atomic_write_parquet(response["elasticities"], folder / "elasticities.parquet")
    atomic_write_text(
        render_report(metrics, calibration, tuning, response, bounds), folder / "report.html"
    )
