"""Benchmark: SASRec and BERT4Rec given the world model's budget, their learning curves beside
global popularity on the same validation baskets (issue #60: neural baselines with a fair chance).

Reads the baselines' view of a materialized warehouse (``load_tasks(with_model=False)``: the
same samples, validation rows and R@20 that ``tuned_baselines`` tunes on; settings
``RETAILSIM_SOURCE``, ``RETAILSIM_WAREHOUSE_DIR``), then trains each model as
``tuned_baselines`` does (``fit_sequential``: training weeks only, early stopping on validation
R@20 with its patience) but within ``--max-seconds`` (default 600 s, the world model's budget)
and up to ``--max-epochs``. Each epoch's validation R@20 and elapsed seconds are the curve;
G-TopFreq's validation R@20 (training-week popularity) is the line a model has to clear.
``stopped_by`` says whether a curve converged (patience) or ran out (budget, epochs).

    RETAILSIM_SOURCE=completejourney RETAILSIM_WAREHOUSE_DIR=... RETAILSIM_TRUTH_DIR= \\
        python -m benchmarks.bench_sequential --record complete_journey_sequential
"""

from __future__ import annotations

import argparse
import dataclasses
import time


def curve_rows(kind: str, info: dict, popularity: float) -> list[list]:
    """(model, epoch, seconds, valid R@20, R@20 - G-TopFreq) per epoch of ``info``'s curve."""
    return [
        [kind, epoch, seconds, r20, r20 - popularity]
        for epoch, (r20, seconds) in enumerate(
            zip(info["valid_curve"], info["curve_seconds"], strict=True), start=1
        )
    ]


def summary_row(kind: str, info: dict, popularity: float) -> list:
    best = info["valid_R@20"]
    verdict = "above G-TopFreq" if best > popularity else "not above G-TopFreq"
    return [kind, info["epochs"], info["best_epoch"], best, info["stopped_by"], verdict]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-seconds", type=float, default=600.0, help="each model's budget")
    ap.add_argument("--max-epochs", type=int, default=40)
    ap.add_argument("--record", metavar="AREA", help="write benchmarks/results/AREA.json")
    args = ap.parse_args()
    from retailsim_core.baselines.counting import g_topfreq
    from retailsim_core.baselines.sequential import SequentialConfig, fit_sequential
    from retailsim_core.next_basket.eval_config import EvalConfig
    from retailsim_core.pipeline.evaluation_run import load_tasks
    from retailsim_core.settings import load_settings
    from retailsim_core.storage.warehouse import Warehouse

    settings = load_settings()
    warehouse = Warehouse(settings.warehouse_dir, calendar=settings.calendar)
    start = time.perf_counter()

    def log(message: str) -> None:
        print(f"{time.perf_counter() - start:7.1f} s  {message}", flush=True)

    tasks = load_tasks(warehouse, settings.split, EvalConfig(), with_model=False)
    rows = tasks.valid_rows
    popularity = tasks.validation_recall(g_topfreq(tasks.popularity["valid"], len(rows)), rows)
    log(f"{len(rows):,} validation baskets; G-TopFreq valid R@20 {popularity:.4f}")
    base = SequentialConfig(max_seconds=args.max_seconds, max_epochs=args.max_epochs)
    curves, summary = [], []
    for kind in ("sasrec", "bert4rec"):
        cfg = dataclasses.replace(base, kind=kind)
        _, info = fit_sequential(
            tasks.data, tasks.valid_day - 1, rows, tasks.validation_recall, cfg, log
        )
        name = {"sasrec": "SASRec", "bert4rec": "BERT4Rec"}[kind]
        curves += curve_rows(name, info, popularity)
        summary.append(summary_row(name, info, popularity))
        log(f"{name}: {summary[-1]}")
    if args.record:
        from benchmarks.results import record, table

        fmt = {"valid R@20": ".4f", "vs G-TopFreq": "+.4f", "seconds": ".0f"}
        record(
            args.record,
            title="SASRec and BERT4Rec to convergence",
            command=f"python -m benchmarks.bench_sequential --record {args.record}",
            tables={
                "summary": table(
                    ["model", "epochs", "best epoch", "valid R@20", "stopped by", "verdict"],
                    summary + [["G-TopFreq", None, None, popularity, None, None]],
                    {"valid R@20": ".4f"},
                ),
                "curves": table(
                    ["model", "epoch", "seconds", "valid R@20", "vs G-TopFreq"], curves, fmt
                ),
            },
        )


if __name__ == "__main__":
    main()
