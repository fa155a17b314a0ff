"""Benchmark: SASRec and BERT4Rec given the world model's budget, their learning curves beside
global popularity on the same validation baskets (issue #60: neural baselines with a fair chance).

Reads the baselines' view of a materialized warehouse (``load_tasks(with_model=False)``: the
same samples, validation rows and R@20 that ``tuned_baselines`` tunes on; settings
``RETAILSIM_SOURCE``, ``RETAILSIM_WAREHOUSE_DIR``), then trains each model as
``tuned_baselines`` does (``fit_sequential``: training weeks only, early stopping on validation
R@20 with its patience) but within ``--max-seconds`` (default 600 s, the world model's budget)
and up to ``--max-epochs``. Each epoch's validation R@20 and elapsed seconds are the curve;
G-TopFreq's validation R@20 (training-week popularity) is the line a model has to clear.
``stopped_by`` says whether a curve converged (patience) or ran out (budget, epochs). Why a
model lands where it does: of its top 20 for each validation basket, the share that is also in
popularity's top 20, and the share the shopper bought before (P-TopFreq's top 20 is all
repeats where the history is long enough; real baskets are mostly repeats).

``--kinds`` and ``--learning-rates`` sweep: each kind is trained at each rate (a model's name
then carries its rate), so whether a larger step learns to copy sooner, and ends the climb that
keeps the synthetic default's BERT4Rec to its epoch cap, is measured rather than argued.

    RETAILSIM_SOURCE=completejourney RETAILSIM_WAREHOUSE_DIR=... RETAILSIM_TRUTH_DIR= \\
        python -m benchmarks.bench_sequential --record complete_journey_sequential
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import numpy as np
import scipy.sparse as sp

SUMMARY = [
    "model",
    "epochs",
    "best epoch",
    "valid R@20",
    "top 20 in popularity's",
    "top 20 bought before",
    "stopped by",
    "verdict",
]
SUMMARY_FORMATS = {
    "valid R@20": ".4f",
    "top 20 in popularity's": ".2f",
    "top 20 bought before": ".2f",
}


def curve_rows(kind: str, info: dict, popularity: float) -> list[list]:
    """(model, epoch, seconds, valid R@20, R@20 - G-TopFreq) per epoch of ``info``'s curve."""
    return [
        [kind, epoch, seconds, r20, r20 - popularity]
        for epoch, (r20, seconds) in enumerate(
            zip(info["valid_curve"], info["curve_seconds"], strict=True), start=1
        )
    ]


def runs(kinds: list[str], rates: list[float], default_lr: float) -> list[tuple[str, str, float]]:
    """(kind, name, learning rate) of every model trained: each kind at each rate, the rate in
    the name unless only the default one is trained."""
    names = {"sasrec": "SASRec", "bert4rec": "BERT4Rec"}
    plain = rates == [default_lr]
    return [
        (kind, names[kind] if plain else f"{names[kind]} lr {lr:g}", lr)
        for kind in kinds
        for lr in rates
    ]


def summary_row(kind: str, info: dict, popularity: float, profile: dict) -> list:
    best = info["valid_R@20"]
    verdict = "above G-TopFreq" if best > popularity else "not above G-TopFreq"
    return [
        kind,
        info["epochs"],
        info["best_epoch"],
        best,
        profile["popular"],
        profile["bought_before"],
        info["stopped_by"],
        verdict,
    ]


def top_k_profile(scores, popular, bought: sp.csr_matrix, k: int = 20) -> dict:
    """Of each row's top ``k`` of ``scores`` (S, V): the mean share also in the top ``k`` of
    ``popular`` (S, V), and the mean share with ``bought`` (S, V, sparse) > 0 (the shopper's
    own past products), read at the picks only (dense, S x V was 0.7 GB at 61,445 products)."""
    top = scores.topk(k, dim=1).indices.numpy()  # (S, k)
    ref = popular.topk(k, dim=1).indices.numpy()
    shared = (top[:, :, None] == ref[:, None, :]).any(axis=2)  # (S, k)
    picked = bought[np.repeat(np.arange(len(top)), k), top.ravel()]  # (1, S * k), pairwise
    repeat = np.asarray(picked).reshape(top.shape) > 0  # (S, k)
    return {"popular": float(shared.mean()), "bought_before": float(repeat.mean())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-seconds", type=float, default=600.0, help="each model's budget")
    ap.add_argument("--max-epochs", type=int, default=40)
    ap.add_argument("--kinds", default="sasrec,bert4rec", help="comma-separated")
    ap.add_argument("--learning-rates", help="comma-separated (default: the baselines' own)")
    ap.add_argument("--record", metavar="AREA", help="write benchmarks/results/AREA.json")
    args = ap.parse_args()
    from retailsim_core.baselines.counting import g_topfreq, p_topfreq, personal_counts
    from retailsim_core.baselines.sequential import (
        SequentialConfig,
        fit_sequential,
        sequential_scores,
    )
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
    bought = personal_counts(tasks.data, rows, tasks.trips)
    popular = g_topfreq(tasks.popularity["valid"], len(rows))
    reference = []
    for name, scores in (("G-TopFreq", popular), ("P-TopFreq", p_topfreq(bought))):
        profile = top_k_profile(scores, popular, bought)
        r20 = tasks.validation_recall(scores, rows)
        reference.append([name, None, None, r20, *profile.values(), None, None])
    popularity = reference[0][3]
    log(f"{len(rows):,} validation baskets; G-TopFreq valid R@20 {popularity:.4f}")
    base = SequentialConfig(max_seconds=args.max_seconds, max_epochs=args.max_epochs)
    curves, summary = [], []
    rates = [float(r) for r in args.learning_rates.split(",")] if args.learning_rates else [base.lr]
    for kind, name, lr in runs(args.kinds.split(","), rates, base.lr):
        cfg = dataclasses.replace(base, kind=kind, lr=lr)
        model, info = fit_sequential(
            tasks.data, tasks.valid_day - 1, rows, tasks.validation_recall, cfg, log
        )
        profile = top_k_profile(
            sequential_scores(model, tasks.data, rows, cfg.seed), popular, bought
        )
        curves += curve_rows(name, info, popularity)
        summary.append(summary_row(name, info, popularity, profile))
        log(f"{name}: {summary[-1]}")
    if args.record:
        from benchmarks.results import record, table

        fmt = {"valid R@20": ".4f", "vs G-TopFreq": "+.4f", "seconds": ".0f"}
        record(
            args.record,
            title="SASRec and BERT4Rec on the world model's budget",
            command=" ".join(["python -m benchmarks.bench_sequential", *sys.argv[1:]]),
            tables={
                "summary": table(SUMMARY, summary + reference, SUMMARY_FORMATS),
                "curves": table(
                    ["model", "epoch", "seconds", "valid R@20", "vs G-TopFreq"], curves, fmt
                ),
            },
        )


if __name__ == "__main__":
    main()
