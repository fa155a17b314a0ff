"""Benchmark: the evaluation over several training seeds, mean +- sd (issue #17 item 6).

For each seed the world model is trained (``small`` preset) and every method is evaluated on the
same test baskets (evaluation seed fixed, so deterministic baselines do not move and the spread
is the training seeds'); SASRec and BERT4Rec are retrained with the same seed. A win is claimed
only where the world model's mean margin over a baseline exceeds twice the sd of the per-seed
margins. Checkpoints and reports go to ``<warehouse>/seed_runs/<seed>/``, leaving the assets alone.

    python benchmarks/bench_seeds.py --warehouse data/warehouse --seeds 0 1 2 [--truth
    data/ground_truth] [--baselines data/warehouse/tuned_baselines]

``--baselines`` scores every seed against one fit of the baselines (the ``tuned_baselines``
asset) instead of refitting them per seed: about 4 minutes less per seed on the default data;
only SASRec's and BERT4Rec's seed spread is then not measured. ``--evaluation NAME`` scores the
seeds' existing checkpoints again, into ``seed_runs/<seed>/NAME/`` (``--test-samples 0``: every
test basket, for slices too small at 6,000, such as cold start).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np

from retailsim_core.models.world_model import WorldModelConfig
from retailsim_core.next_basket.eval_config import EvalConfig
from retailsim_core.pipeline.baseline_fitting import fit_baselines
from retailsim_core.pipeline.evaluation_run import evaluate
from retailsim_core.pipeline.world_model_training import train_world_model
from retailsim_core.settings import load_settings
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.training.run.train_config import TrainConfig

METRICS = (("next_basket", "R@20"), ("next_basket", "NDCG@10"), ("masked_item", "Hit@10"))


def margins(runs: list[dict], slice_name: str) -> list[dict]:
    """Per (task, metric, rival): mean and sd of the world model's per-seed margin."""
    out = []
    for task, metric in METRICS:
        model = "world_model"
        rivals = sorted(runs[0][task][slice_name])
        for rival in rivals:
            if (
                rival == model
                or rival.startswith("oracle")
                or "given mission" in rival
                or rival == "Mission-P-TopFreq"
            ):
                continue
            diff = np.array(
                [
                    r[task][slice_name][model][metric] - r[task][slice_name][rival][metric]
                    for r in runs
                ]
            )
            sd = float(diff.std(ddof=1)) if len(diff) > 1 else float("nan")
            out.append(
                {
                    "task": task,
                    "metric": metric,
                    "rival": rival,
                    "margin_mean": float(diff.mean()),
                    "margin_sd": sd,
                    "win": bool(diff.mean() > 2 * sd) if len(diff) > 1 else None,
                }
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--warehouse", default="data/warehouse")
    ap.add_argument("--truth", default=None)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--test-samples", type=int, default=6_000, help="0: every test basket")
    ap.add_argument("--slice", default="all")
    ap.add_argument("--baselines", default=None, help="one baseline fit for every seed")
    ap.add_argument(
        "--evaluation",
        default=None,
        help="evaluate the seeds' existing checkpoints again into seed_runs/<seed>/<this>",
    )
    ap.add_argument("--record", action="store_true", help="write results/seeds.json")
    args = ap.parse_args()
    wh, split = Warehouse(Path(args.warehouse)), load_settings().split
    runs = []
    for seed in args.seeds:
        folder = Path(args.warehouse) / "seed_runs" / str(seed)
        out = folder / args.evaluation if args.evaluation else folder
        report = out / "metrics.json"
        if not report.exists():
            if not args.evaluation:
                train_world_model(
                    wh,
                    split,
                    WorldModelConfig.preset("small"),
                    TrainConfig.preset("small", seed=seed),
                    log=print,
                    folder=folder / "checkpoint",
                )
            cfg = EvalConfig(max_test_samples=args.test_samples or None, seed=0)
            if args.baselines:  # one shared fit, with its own sequence-model seed
                baselines = Path(args.baselines)
            else:
                baselines = folder / "baselines"
                cfg = dataclasses.replace(
                    cfg, sequential=dataclasses.replace(cfg.sequential, seed=seed)
                )
                if not (args.evaluation and baselines.exists()):  # a re-scoring reuses the fit
                    fit_baselines(wh, split, cfg, log=print, folder=baselines)
            evaluate(
                wh,
                split,
                Path(args.truth) if args.truth else None,
                cfg,
                log=print,
                checkpoint=folder / "checkpoint",
                folder=out,
                baselines=baselines,
            )
        runs.append(json.loads(report.read_text()))
    for task, metric in METRICS:
        print(f"\n{task} {metric} ({args.slice}), mean +- sd over seeds {args.seeds}")
        for method in sorted(runs[0][task][args.slice]):
            v = np.array(
                [r[task][args.slice][method][metric] for r in runs if method in r[task][args.slice]]
            )
            print(f"  {method:30s} {v.mean():.4f} +- {v.std(ddof=1) if len(v) > 1 else 0:.4f}")
    print("\nworld_model margins (win = mean > 2 sd of the per-seed margins)")
    for m in margins(runs, args.slice):
        print(
            f"  {m['task']:12s} {m['metric']:8s} vs {m['rival']:26s} {m['margin_mean']:+.4f} +- "
            f"{m['margin_sd']:.4f}"
            f"  {'WIN' if m['win'] else 'no win'}"
        )
    if args.record:
        record_seeds(runs, args)


def record_seeds(runs: list[dict], args) -> None:
    """Each method's mean over the seeds and the world model's margin (mean ± sd, win or not)."""
    from benchmarks.results import record, table

    nb = [r["next_basket"][args.slice] for r in runs]
    found = {
        (m["metric"], m["rival"]): m
        for m in margins(runs, args.slice)
        if m["task"] == "next_basket"
    }

    def margin(metric: str, method: str) -> str | None:
        m = found.get((metric, method))
        if m is None:
            return None
        word = "win" if m["win"] else "no win"
        return f"{m['margin_mean']:+.4f} ± {m['margin_sd']:.4f}, {word}"

    methods = sorted(nb[0], key=lambda m: -np.mean([r[m]["R@20"] for r in nb if m in r]))
    rows = [
        [m]
        + [float(np.mean([r[m][k] for r in nb if m in r])) for k in ("R@20", "NDCG@10")]
        + [margin(k, m) for k in ("R@20", "NDCG@10")]
        for m in methods
    ]
    cols = ["method", "R@20", "NDCG@10", "margin R@20", "margin NDCG@10"]
    seeds = " ".join(map(str, args.seeds))
    record(
        "seeds",
        title="Next-basket quality over training seeds",
        command=f"python -m benchmarks.bench_seeds --seeds {seeds} --record",
        tables={"methods": table(cols, rows, {"R@20": ".4f", "NDCG@10": ".4f"})},
    )


if __name__ == "__main__":
    main()
