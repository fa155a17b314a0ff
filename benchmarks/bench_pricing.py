"""Benchmark: pricing policies with every seed on both simulators (issue #39, decision D89).

Runs ``pipeline/pricing_run.run_pricing`` on a materialized warehouse (``trained_checkpoint``
and ``holdout_checkpoint`` present) with 5 PPO seeds by default, writes the same
``results.json`` / ``report.md`` as the ``pricing_policy`` asset into ``--out``, and measures the
environment's speed (steps per second on one category's panel; target >= 100 on 2 cores at the
default data). Settings (split, warehouse, truth) are the ``RETAILSIM_*`` ones.

    python benchmarks/bench_pricing.py --out data/bench/pricing [--seeds 5 --timesteps 10000]
        [--penalty 1.0]  # PPO with the uncertainty penalty too (D89)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

STEPS_TARGET = 100.0


def env_speed(panel, steps: int = 200) -> float:
    """Environment steps per second with random actions."""
    from retailsim_core.pricing.environment import ConstrainedPricingEnv

    env = ConstrainedPricingEnv(panel)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    start, done = time.perf_counter(), False
    for _ in range(steps):
        _, _, done, _, _ = env.step(rng.uniform(-1, 1, panel.n).astype(np.float32))
        if done:
            env.reset(seed=0)
    return steps / (time.perf_counter() - start)


def main() -> None:
    from retailsim_core.pipeline import pricing_run
    from retailsim_core.settings import load_settings
    from retailsim_core.storage.warehouse import Warehouse
    from retailsim_core.tables import CHECKPOINT_TABLE, HOLDOUT_TABLE

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--timesteps", type=int, default=pricing_run.PricingRunConfig.ppo_timesteps)
    parser.add_argument("--categories", type=int, default=3)
    parser.add_argument("--contexts", type=int, default=64)
    parser.add_argument("--penalty", type=float, default=0.0, help="> 0: also penalised PPO")
    parser.add_argument("--record", action="store_true", help="write results/pricing.json")
    args = parser.parse_args()
    torch.set_num_threads(2)
    settings = load_settings()
    wh = Warehouse(settings.warehouse_dir, calendar=settings.calendar)
    cfg = pricing_run.PricingRunConfig(
        categories=args.categories,
        contexts_per_week=args.contexts,
        seeds=args.seeds,
        ppo_timesteps=args.timesteps,
        penalty=args.penalty,
    )
    speeds: list[float] = []
    measure = pricing_run._price_category

    def timed(model, second, weeks, batches, rows, run_cfg, planted):
        if not speeds:  # the first category's panel, before any policy runs
            tokens = rows["token"].to_numpy()
            panel = pricing_run.build_panel(model, weeks, batches, tokens, rows)
            speeds.append(env_speed(panel))
        return measure(model, second, weeks, batches, rows, run_cfg, planted)

    pricing_run._price_category = timed
    start = time.perf_counter()
    results = pricing_run.run_pricing(
        wh,
        settings.split,
        wh.table_dir(CHECKPOINT_TABLE),
        wh.table_dir(HOLDOUT_TABLE),
        args.out,
        cfg,
        print,
        truth_dir=settings.truth,
    )
    print((args.out / "report.md").read_text())
    speed = speeds[0] if speeds else float("nan")
    verdict = "met" if speed >= STEPS_TARGET else "MISSED"
    print(f"environment: {speed:.0f} steps/s (target >= {STEPS_TARGET:.0f}: {verdict})")
    print(f"wall: {time.perf_counter() - start:.0f} s; results: {args.out / 'results.json'}")
    (args.out / "speed.json").write_text(json.dumps({"env_steps_per_second": speed}) + "\n")
    assert results["categories"], "no category priced"
    if args.record:
        from benchmarks.record_evaluation import pricing_table
        from benchmarks.results import record, table

        wall = time.perf_counter() - start
        run = table(
            ["seeds", "timesteps", "categories", "wall s", "environment steps/s"],
            [[args.seeds, args.timesteps, args.categories, wall, speed]],
            {"wall s": ",.0f", "environment steps/s": ",.0f"},
        )
        record(
            "pricing",
            title="Pricing policies",
            command=f"python -m benchmarks.bench_pricing --seeds {args.seeds} --record",
            tables={"run": run, "lifts": pricing_table(results)},
        )


if __name__ == "__main__":
    main()
