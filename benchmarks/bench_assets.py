"""Benchmark: the asset graph through Dagster as a user runs it, wall time per asset.

Materializes, with the project's executor (two steps at once), the data and feature assets over
every week of ``--raw`` and then, with ``--model``, the model group (``tuned_baselines``,
``trained_checkpoint``, ``evaluation_report``, ``onnx_scoring_graph``), each with
``dagster asset materialize`` in a subprocess, and prints each step's duration from the run's
event log. Targets (issue #21, on the 3.03M-row real LGSR sample): data and feature assets
<= 60 s wall; ``evaluation_report`` <= 180 s.

    python benchmarks/bench_assets.py --raw <week files> --warehouse <new or existing folder>
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS = {"data and feature assets": 60.0, "evaluation_report": 180.0}
MODEL_GROUP = "model"


def asset_keys() -> tuple[list[str], list[str]]:
    """(data and feature assets, model assets) of the project's definitions."""
    from retailsim_dagster.definitions import defs

    graph = defs.resolve_asset_graph()
    keys = sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string())
    model = [k.to_user_string() for k in keys if graph.get(k).group_name == MODEL_GROUP]
    data = [k.to_user_string() for k in keys if graph.get(k).group_name != MODEL_GROUP]
    return data, model


def materialize(keys: list[str], env: dict, partition_range: str | None) -> float:
    """Wall seconds of one ``dagster asset materialize``; its log goes to $DAGSTER_HOME/run.log
    (the tail is printed if the run fails)."""
    cmd = [sys.executable, "-m", "dagster", "asset", "materialize", "-m"]
    cmd += ["retailsim_dagster.definitions", "--select", ",".join(keys)]
    if partition_range:
        cmd += ["--partition-range", partition_range]
    log = Path(env["DAGSTER_HOME"]) / "run.log"
    start = time.perf_counter()
    with log.open("a") as out:
        done = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode:
        sys.exit(f"materialize failed:\n{''.join(log.read_text().splitlines(True)[-30:])}")
    return time.perf_counter() - start


def step_seconds(home: str) -> dict[str, float]:
    """Every step's duration in the latest runs of the instance at ``home``."""
    import dagster as dg

    os.environ["DAGSTER_HOME"] = home
    instance = dg.DagsterInstance.get()
    out = {}
    for run in instance.get_runs(limit=2):
        for stat in instance.get_run_step_stats(run.run_id):
            if stat.start_time and stat.end_time:
                out[stat.step_key] = stat.end_time - stat.start_time
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", required=True)
    ap.add_argument("--warehouse", required=True)
    ap.add_argument("--model", action="store_true", help="also the model group")
    args = ap.parse_args()
    from retailsim_core.calendar import week_key_of
    from retailsim_core.ingest.raw_files import list_week_files

    weeks = [f.week for f in list_week_files(Path(args.raw))]
    weeks_range = f"{week_key_of(min(weeks))}...{week_key_of(max(weeks))}"
    home = tempfile.mkdtemp(prefix="bench_assets_")
    env = os.environ | {
        "DAGSTER_HOME": home,
        "RETAILSIM_RAW_DIR": str(Path(args.raw).resolve()),
        "RETAILSIM_WAREHOUSE_DIR": str(Path(args.warehouse).resolve()),
        "RETAILSIM_TRUTH_DIR": os.environ.get("RETAILSIM_TRUTH_DIR", ""),
        "DGLBACKEND": "pytorch",
    }
    data, model = asset_keys()
    walls = {"data and feature assets": materialize(data, env, weeks_range)}
    if args.model:
        walls["model assets"] = materialize(model, env, None)
    steps = step_seconds(home)
    print(f"{len(weeks)} week files in {args.raw}; two steps at once (multiprocess executor)")
    for step, seconds in sorted(steps.items(), key=lambda kv: -kv[1]):
        print(f"  {step:40s} {seconds:8.1f} s")
    if args.model:
        walls["evaluation_report"] = steps["evaluation_report"]
    for name, seconds in walls.items():
        target = TARGETS.get(name)
        verdict = (
            ""
            if target is None
            else (f"  target <= {target:g} s: {'met' if seconds <= target else 'NOT met'}")
        )
        print(f"{name:42s} {seconds:8.1f} s{verdict}")


if __name__ == "__main__":
    main()
