"""The evaluation protocol, top to bottom (design §4.7.4; decisions D42, D52).

The pipeline (``pipeline/evaluation_run.evaluate``) loads every input once and calls the two
halves here, which read nothing themselves. The stages, each a module of this package:

1. ``tasks``: the checkpoint and the validation and test baskets, with what metrics need;
2. ``tuning``: every tunable baseline as chosen on validation weeks by the ``tuned_baselines``
   asset (``tuned_folder.py``, D68), set up on the test period;
3. ``scorers``: every method as a function of what it may know (``METHOD_INPUTS``);
4. ``scoring``: all methods on the same test baskets, next-basket and masked-item;
5. ``summary`` and ``calibration``: metrics by slice with customer-bootstrap intervals, the
   auxiliary heads' calibration;
6. ``price_checks``: elasticities, simulated baskets, the held-out promotion check;
7. ``report``: the files of the ``evaluation_report`` folder and ``report.html``.

:func:`score` runs stages 2-5, :func:`finish` stages 6-7 (the pipeline reads the price checks'
inputs for the rows :func:`score` chose in between).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from retailsim_core.next_basket.calibration import aux_calibration
from retailsim_core.next_basket.eval_config import EvalConfig
from retailsim_core.next_basket.methods import METHOD_INPUTS, method_scorers
from retailsim_core.next_basket.scoring import concat_results, score_rows
from retailsim_core.next_basket.summary import (
    intervals,
    nested_metrics,
    slices,
    vocabulary_coverage,
)
from retailsim_core.next_basket.tasks import EvalTasks
from retailsim_core.next_basket.tuning import TunedBaselines, baseline_scorers
from retailsim_core.report.files import write_report
from retailsim_core.response.price_checks import PriceInputs, price_checks
from retailsim_core.response.price_events import EVENT_CHUNK, EventCheck, price_event_check
from retailsim_core.storage.heap import release_free_heap
from retailsim_core.synth.world import PlantedTruth


@dataclass(frozen=True)
class EvalReport:
    """What an evaluation wrote to its report folder, as values."""

    metrics: dict  # {task: {slice: {method: {metric: value}}}} (metrics.json)
    intervals: dict  # 95% customer-bootstrap intervals of the same (intervals.json)
    tuning: dict  # the run's facts: baselines' choices, sample counts, checks (tuning.json)
    calibration: dict  # the auxiliary heads' calibration
    price_response: dict  # elasticities and their checks (the report's price sections)


@dataclass(frozen=True)
class Scored:
    """Stages 2-5: every method scored, summarised by slice."""

    sample_rows: np.ndarray  # the test sample's rows, in scoring order
    slice_rows: dict[str, np.ndarray]  # slice name -> rows of the results
    metrics: dict  # {task: {slice: {method: {metric: value}}}}
    bounds: dict  # 95% intervals of the same
    calibration: dict  # the auxiliary heads' calibration
    truth: PlantedTruth | None  # the planted truth the oracles read (None: they did not run)
    oracle_note: str | None  # why the oracles did not run


def score(
    tasks: EvalTasks,
    tuned: TunedBaselines,
    truth: PlantedTruth | None,
    oracle_note: str | None,
    cfg: EvalConfig,
    log: Callable[[str], None] = lambda _: None,
) -> Scored:
    """Every method on the test baskets with the baselines tuned on validation weeks.
    ``truth``: the bound planted truth (adds the oracles), or None with ``oracle_note``."""
    scorers, masked, skipped = method_scorers(
        tasks, baseline_scorers(tasks, tuned, cfg), truth, log
    )
    results = score_rows(tasks.data, tasks.test_rows, scorers, masked, tasks.context, cfg, log)
    sample_rows = results.rows
    if len(tasks.cold_start_rows):  # scored apart: the sample's chunks and masks stay as they are
        extra = score_rows(
            tasks.data, tasks.cold_start_rows, scorers, masked, tasks.context, cfg, log
        )
        results = concat_results(results, extra)
    in_sample = np.arange(len(results.rows)) < len(sample_rows)
    slice_rows = slices(tasks.samples, tasks.data, results.rows, cfg.week_slices, in_sample)
    return Scored(
        sample_rows=sample_rows,
        slice_rows=slice_rows,
        metrics=nested_metrics(results, slice_rows),
        bounds=intervals(results, slice_rows, tasks.customers[results.rows], cfg),
        calibration=aux_calibration(tasks.model, tasks.data, sample_rows),
        truth=truth if "oracle" in scorers else None,
        oracle_note=skipped or oracle_note,
    )


def finish(
    tasks: EvalTasks,
    tuned: TunedBaselines,
    scored: Scored,
    prices: PriceInputs,
    cfg: EvalConfig,
    folder: Path,
    started: float,
    log: Callable[[str], None] = lambda _: None,
    source: str | None = None,
) -> EvalReport:
    """The price checks, then the report written to ``folder``; ``started``: the run's
    ``time.perf_counter()`` at its start; ``source``: the data's source (its calendar's name),
    which decides the targets the report judges."""
    chunk = cfg.chunk_for(tasks.data.vocab.size)  # a large vocabulary: fewer rows at once
    # A simulated chunk holds its contexts' price book (B, V, 9) beside the batch and the slot
    # decoder's (B, V) matrices, about what a differentiated chunk holds: both take the
    # Jacobians' chunk (D127).
    half = cfg.grad_chunk_for(tasks.data.vocab.size)
    release_free_heap()  # what the scoring freed, before the price checks (D126)
    response, simulation = price_checks(
        tasks, scored.sample_rows, prices, scored.truth, cfg.seed, log, half
    )
    tables = {}
    if tasks.model is not None and prices.trips is not None and prices.promotions is not None:
        release_free_heap()
        check = event_check(tasks, prices, cfg.seed, scored.truth, chunk=chunk)
        response["events"] = check.summary
        tables = {"price_events": check.events, "price_event_products": check.products}
        log(f"promotion events ({prices.promotion_source}): {_headline(check.summary)}")
    tuning = {
        **tuned.info,
        "source": source,
        "test_samples": len(tasks.test_rows),
        "cold_start_outside_sample": len(tasks.cold_start_rows),
        "slice_baskets": {name: len(idx) for name, idx in scored.slice_rows.items()},
        "validation_samples": len(tasks.valid_rows),
        "checkpoint": tasks.config["summary"],
        "scored_checkpoints": tasks.config.get("scored"),  # the ids of the models scored (D113)
        "split": tasks.config.get("split"),  # the checkpoint's training and validation weeks
        "refreshed_weeks": sorted(tasks.refreshed) if tasks.refreshed else None,
        "simulation": simulation["summary"],
        "simulated_sizes": simulation["sizes"],
        "method_inputs": METHOD_INPUTS,
        "oracle_note": scored.oracle_note,
        "elasticity_context": response["context"],
        "elasticity_contexts": response["contexts"],
        "planted_elasticity_correlation": response.get("planted_correlation"),
        "planted_elasticity_spearman": response.get("planted_spearman"),
        "own_elasticity_negative_share": response.get("own_negative_share"),
        "substitution": response.get("substitution"),
        "observed_response": response["observed"],
        "price_events": response.get("events"),
        "vocabulary_coverage": _coverage(tasks, prices),
        "seconds": round(time.perf_counter() - started, 1),
    }
    write_report(
        folder, scored.metrics, scored.bounds, scored.calibration, tuning, response, tables
    )
    return EvalReport(
        metrics=scored.metrics,
        intervals=scored.bounds,
        tuning=tuning,
        calibration=scored.calibration,
        price_response=response,
    )


def event_check(
    tasks: EvalTasks,
    prices: PriceInputs,
    seed: int,
    truth: PlantedTruth | None = None,
    chunk: int = EVENT_CHUNK,
) -> EventCheck:
    """The promotion-event check (D76) on every test basket of ``tasks``; with the planted
    ``truth``, against the planted demand too; ``chunk``: baskets per forward."""
    vocab = tasks.data.vocab.frame()
    categories = vocab.select(
        "product_id",
        category=pl.Series(tasks.categories[vocab["token"].to_numpy()]).cast(pl.String),
    )
    return price_event_check(
        tasks.model,
        tasks.data,
        tasks.samples,
        prices.trips,
        prices.promotions,
        categories,
        prices.promotion_source,
        seed,
        fit_baskets=prices.fit_baskets,
        truth=truth,
        chunk=min(chunk, EVENT_CHUNK),
    )


def _coverage(tasks: EvalTasks, prices: PriceInputs) -> dict | None:
    """The vocabulary's share of the test baskets' purchases (issue #35: a vocabulary policy
    is judged by what it leaves out)."""
    if prices.trips is None:
        return None
    test = tasks.samples["basket_id"].filter(tasks.samples["split"] == "test")
    return vocabulary_coverage(prices.trips, test, tasks.data.vocab.frame())


def _headline(summary: dict) -> str:
    if not summary.get("events"):
        return "no event in the test weeks"
    wm = summary["methods"]["world_model"]
    return (
        f"{summary['events']} events over {wm['products']} products; world model Spearman "
        f"{wm['spearman']}, slope {wm['calibration_slope']}, WAPE {wm['wape']}"
    )
