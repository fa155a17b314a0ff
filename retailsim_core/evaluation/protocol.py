"""The evaluation protocol, top to bottom (design §4.7.4; decisions D42, D52).

:func:`evaluate` is the one entry point. Its stages, each a module of this package:

1. ``tasks``: the checkpoint and the validation and test baskets, with what metrics need;
2. ``tuning``: every tunable baseline as chosen on validation weeks by the ``tuned_baselines``
   asset (``pipeline/baseline_fitting.py``, D68), set up on the test period;
3. ``scorers``: every method as a function of what it may know (``METHOD_INPUTS``);
4. ``scoring``: all methods on the same test baskets, next-basket and masked-item;
5. ``summary`` and ``calibration``: metrics by slice with customer-bootstrap intervals, the
   auxiliary heads' calibration;
6. ``price_checks``: elasticities, simulated baskets, the held-out promotion check;
7. ``report``: the files of the ``evaluation_report`` folder and ``report.html``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from retailsim_core.evaluation.calibration import aux_calibration
from retailsim_core.evaluation.eval_config import EvalConfig
from retailsim_core.evaluation.price_checks import price_checks
from retailsim_core.evaluation.report import REPORT_TABLE, write_report
from retailsim_core.evaluation.scorers import METHOD_INPUTS, method_scorers
from retailsim_core.evaluation.scoring import concat_results, score_rows
from retailsim_core.evaluation.summary import intervals, nested_metrics, slices
from retailsim_core.evaluation.tasks import load_tasks
from retailsim_core.evaluation.tuning import baseline_scorers
from retailsim_core.pipeline.baseline_fitting import BASELINES_TABLE, load_baselines
from retailsim_core.pipeline.truth import bind_truth
from retailsim_core.split import TemporalSplit
from retailsim_core.warehouse import Warehouse


def evaluate(
    warehouse: Warehouse,
    split: TemporalSplit,
    truth_dir: Path | None,
    cfg: EvalConfig = EvalConfig(),
    log: Callable[[str], None] = lambda _: None,
    checkpoint: Path | None = None,
    folder: Path | None = None,
    baselines: Path | None = None,
) -> dict:
    """Score every method on the test baskets with the baselines tuned on validation weeks, write
    the report (default folders: the warehouse's ``trained_checkpoint``, ``tuned_baselines`` and
    ``evaluation_report``; ``fit_baselines`` writes the second).

    ``truth_dir``: the generator's planted truth (adds the oracles and the planted-elasticity
    check when it was generated with the ingested files, else skipped with a note), or None.
    Returns {"metrics", "intervals", "tuning", "calibration", "price_response"}.
    """
    start = time.perf_counter()
    binding = bind_truth(truth_dir, warehouse)  # first: a mismatch is said before any work
    truth_dir, oracle_note = binding.truth_dir, binding.note
    if oracle_note:
        log(oracle_note)
    torch.manual_seed(cfg.seed)
    tasks = load_tasks(warehouse, split, cfg, checkpoint)
    tuned = load_baselines(baselines or warehouse.table_dir(BASELINES_TABLE), tasks, cfg)
    scorers, masked, skipped = method_scorers(
        tasks, baseline_scorers(tasks, tuned, cfg), truth_dir, log
    )
    oracle_note = skipped or oracle_note
    results = score_rows(tasks.data, tasks.test_rows, scorers, masked, tasks.context, cfg, log)
    sample_rows = results.rows
    if len(tasks.cold_start_rows):  # scored apart: the sample's chunks and masks stay as they are
        extra = score_rows(
            tasks.data, tasks.cold_start_rows, scorers, masked, tasks.context, cfg, log
        )
        results = concat_results(results, extra)
    in_sample = np.arange(len(results.rows)) < len(sample_rows)
    slice_rows = slices(tasks.samples, tasks.data, results.rows, cfg.week_slices, in_sample)
    metrics = nested_metrics(results, slice_rows)
    bounds = intervals(results, slice_rows, tasks.customers[results.rows], cfg)
    calibration = aux_calibration(tasks.model, tasks.data, sample_rows)
    planted = truth_dir if "oracle" in scorers else None
    response, simulation = price_checks(
        tasks, sample_rows, warehouse, split, planted, cfg.seed, log
    )
    tuning = {
        **tuned.info,
        "test_samples": len(tasks.test_rows),
        "cold_start_outside_sample": len(tasks.cold_start_rows),
        "slice_baskets": {name: len(idx) for name, idx in slice_rows.items()},
        "validation_samples": len(tasks.valid_rows),
        "checkpoint": tasks.config["summary"],
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
