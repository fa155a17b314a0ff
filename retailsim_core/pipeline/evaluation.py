"""``evaluation_report``: the world model against every baseline on the same test samples.

Validation weeks tune the baselines (TIFU-KNN grid, SASRec/BERT4Rec size and epochs); test weeks
are scored once. Outputs in the table folder: ``metrics.json`` ({task: {slice: {method:
{metric: value}}}}), ``metrics.parquet`` (the same, long), ``calibration.parquet``,
``tuning.json`` and the self-contained ``report.html``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import torch

from retailsim_core.evaluation import baselines as bl
from retailsim_core.evaluation.metrics import next_basket_metrics, truth_matrix
from retailsim_core.evaluation.oracle import oracle_scorer
from retailsim_core.evaluation.price_response import price_response, simulation_check
from retailsim_core.evaluation.report_html import render_report
from retailsim_core.evaluation.run import EvalConfig, aux_calibration, nested_metrics, score_rows, slices, subsample, world_model_scorer
from retailsim_core.evaluation.sequential import fit_sequential, sequential_scores
from retailsim_core.io import atomic_write_parquet, atomic_write_text
from retailsim_core.pipeline.embeddings import load_embeddings
from retailsim_core.pipeline.features import PRICE_FEATURES_TABLE
from retailsim_core.pipeline.world_model import CHECKPOINT_TABLE, load_model, load_model_inputs
from retailsim_core.split import TemporalSplit
from retailsim_core.tensors import TensorConfig
from retailsim_core.warehouse import Warehouse

REPORT_TABLE = "evaluation_report"


def _context(data, samples: pl.DataFrame, store, trips, categories, prices, rows: np.ndarray) -> dict:
    """What the metrics need besides scores: products bought before, the predicted basket size of
    ``rows`` (the customer's mean trip size; the median trip for new customers), prices, spend."""
    sizes = np.diff(data.trip_offsets).astype(np.float64)
    w = bl.history_weights(*bl.sample_history(data, rows))
    n = np.asarray(w.sum(1)).ravel()
    basket_len = np.zeros(len(samples), dtype=np.int64)
    basket_len[rows] = np.where(n > 0, np.rint((w @ sizes) / np.maximum(n, 1)), np.median(sizes))
    spend = samples.join(store.trips.select("basket_id", "spend"), on="basket_id", how="left",
                         maintain_order="left")["spend"].fill_null(0.0).to_numpy()
    return {"repeat_of": lambda r: (bl.personal_counts(data, r, trips) > 0).astype(np.float32),
            "basket_len": basket_len, "categories": categories, "spend": spend,
            "prices_of": lambda r: np.broadcast_to(prices, (len(r), len(prices)))}


def evaluate(warehouse: Warehouse, split: TemporalSplit, truth_dir: Path | None, cfg: EvalConfig = EvalConfig(),
             log: Callable[[str], None] = lambda _: None) -> dict:
    start = time.perf_counter()
    torch.manual_seed(cfg.seed)
    folder = warehouse.table_dir(CHECKPOINT_TABLE)
    model, vocab, config = load_model(folder)
    inputs = load_model_inputs(warehouse)
    if inputs.vocab != vocab:
        raise ValueError("the checkpoint's vocabulary differs from the warehouse's GraphSAGE products: retrain")
    samples = inputs.samples.filter(pl.col("split") != "train")
    data = inputs.training_set(samples, TensorConfig(**config["tensors"]))
    split_col = samples["split"].to_numpy()
    valid_rows = subsample(np.flatnonzero(split_col == "validation"), cfg.max_valid_samples, cfg.seed)
    test_rows = subsample(np.flatnonzero(split_col == "test"), cfg.max_test_samples, cfg.seed + 1)
    trips = bl.trip_matrix(data)
    days = data.trip_day
    test_start_day = _first_day(inputs.store.trips, split.valid_end + 1)
    valid_start_day = _first_day(inputs.store.trips, split.train_end + 1)
    pop_test = np.asarray(trips[days < test_start_day].sum(0)).ravel()
    _, id_map = load_embeddings(warehouse)
    cat_codes = vocab.frame().join(id_map.select("product_id", "prod_code_10"), on="product_id", how="left")
    categories = np.zeros(vocab.size, dtype=np.int64)
    categories[cat_codes["token"].to_numpy()] = cat_codes["prod_code_10"].cast(pl.Categorical).to_physical().to_numpy() + 1
    prices = _mean_prices(inputs, vocab.size)
    ctx = _context(data, samples, inputs.store, trips, categories, prices, np.r_[valid_rows, test_rows])

    def valid_r20(scores, rows):
        truth = truth_matrix(data.item_tokens, data.item_starts[rows], np.minimum(data.item_counts[rows], 50), vocab.size)
        m = next_basket_metrics(torch.as_tensor(scores), truth, repeat=ctx["repeat_of"](rows),
                                basket_len=ctx["basket_len"][rows], categories=categories)
        return float(m["R@20"].mean())

    # Tuning on validation weeks only.
    pool_valid = bl.tifu_pool(data, trips, valid_start_day)
    def tifu_scores(c, rows, pool):
        vectors, customers = pool
        return bl.tifu_knn(bl.tifu_vectors(data, rows, trips, c), vectors(c), c, bl.sample_customers(data, rows), customers)

    tifu_grid = [(valid_r20(tifu_scores(c, valid_rows, pool_valid), valid_rows), i, c) for i, c in enumerate(cfg.tifu.grid())]
    tifu_best = max(tifu_grid, key=lambda t: (t[0], -t[1]))[2]
    log(f"TIFU-KNN tuned on validation: {tifu_best}")
    train_last_day = valid_start_day - 1
    sasrec, sas_info = fit_sequential(data, train_last_day, valid_rows, valid_r20, cfg.sequential, log)
    bert, bert_info = fit_sequential(data, train_last_day, valid_rows, valid_r20,
                                     dataclasses.replace(cfg.sequential, kind="bert4rec"), log)
    pool_test = bl.tifu_pool(data, trips, test_start_day)
    scorers = {
        "world_model": world_model_scorer(model, "true"),
        "world_model_sampled_t6": world_model_scorer(model, "sampled", data.t1_names, cfg.seed),
        "G-TopFreq": lambda rows, b: bl.g_topfreq(pop_test, len(rows)),
        "P-TopFreq": lambda rows, b: bl.p_topfreq(bl.personal_counts(data, rows, trips)),
        "GP-TopFreq": lambda rows, b: bl.gp_topfreq(bl.personal_counts(data, rows, trips), pop_test),
        "TIFU-KNN": lambda rows, b: tifu_scores(tifu_best, rows, pool_test),
        "SASRec": lambda rows, b: sequential_scores(sasrec, data, rows),
        "BERT4Rec": lambda rows, b: sequential_scores(bert, data, rows),
    }
    truth = Path(truth_dir) if truth_dir is not None and (Path(truth_dir) / "config.json").exists() else None
    if truth is not None:
        scorers["oracle"] = oracle_scorer(truth, samples, vocab)
    results = score_rows(data, test_rows, scorers, model, ctx, cfg, log)
    slice_rows = slices(samples, data, results.rows)
    metrics = nested_metrics(results, slice_rows)
    calibration = aux_calibration(model, data, results.rows)
    response = price_response(model, data, results.rows, categories, truth)
    sim_rows = results.rows[:: max(len(results.rows) // 256, 1)][:256]
    sim_samples = samples[sim_rows]
    sim_prices = (warehouse.scan(PRICE_FEATURES_TABLE, sorted(set(sim_samples["week"].to_list())))
                  .filter(pl.col("store_id").is_in(sim_samples["store_id"].unique().implode())).collect())
    simulation = simulation_check(model, data, sim_rows, sim_prices, sim_samples["store_id"].to_list(),
                                  sim_samples["week"].to_list(), seed=cfg.seed)
    log(f"elasticities for {response['context']}; simulation check {simulation}")
    tuning = {"TIFU-KNN": tifu_best.__dict__, "SASRec": sas_info, "BERT4Rec": bert_info,
              "test_samples": len(test_rows), "validation_samples": len(valid_rows),
              "checkpoint": config["summary"], "simulation": simulation,
              "elasticity_context": response["context"], "elasticity_contexts": response["contexts"],
              "planted_elasticity_correlation": response.get("planted_correlation"),
              "planted_elasticity_spearman": response.get("planted_spearman"),
              "own_elasticity_negative_share": response.get("own_negative_share"),
              "substitution": response.get("substitution"),
              "seconds": round(time.perf_counter() - start, 1)}
    write_report(warehouse.table_dir(REPORT_TABLE), metrics, calibration, tuning, response)
    return {"metrics": metrics, "tuning": tuning, "calibration": calibration, "price_response": response}


def _first_day(trips: pl.DataFrame, week: int) -> int:
    later = trips.filter(pl.col("week") >= week)
    return int(later["shop_date"].cast(pl.Int32).min()) if later.height else 10**9


def _mean_prices(inputs, vocab_size: int) -> np.ndarray:
    """Mean week price of each token over the loaded price rows (for revenue of a predicted basket)."""
    prices = inputs.tables["price_features"].group_by("product_id").agg(pl.col("actual_price").mean())
    tokens = inputs.vocab.frame().join(prices, on="product_id", how="left")
    out = np.zeros(vocab_size)
    out[tokens["token"].to_numpy()] = tokens["actual_price"].fill_null(0.0).to_numpy()
    return out


def long_metrics(metrics: dict) -> pl.DataFrame:
    rows = [{"task": t, "slice": s, "method": m, "metric": k, "value": float(v)}
            for t, by_slice in metrics.items() for s, by_method in by_slice.items()
            for m, vals in by_method.items() for k, v in vals.items()]
    return pl.DataFrame(rows, schema={"task": pl.String, "slice": pl.String, "method": pl.String,
                                      "metric": pl.String, "value": pl.Float64})


def write_report(folder: Path, metrics: dict, calibration: pl.DataFrame, tuning: dict, response: dict) -> None:
    atomic_write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n", folder / "metrics.json")
    atomic_write_parquet(long_metrics(metrics), folder / "metrics.parquet")
    atomic_write_parquet(calibration, folder / "calibration.parquet")
    atomic_write_text(json.dumps(tuning, indent=2, sort_keys=True, default=str) + "\n", folder / "tuning.json")
    atomic_write_parquet(response["elasticities"], folder / "elasticities.parquet")
    atomic_write_text(render_report(metrics, calibration, tuning, response), folder / "report.html")
