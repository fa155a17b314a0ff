"""Benchmark: a make target from a fresh clone, as a new user runs it, wall time per model step.

Clones this checkout's HEAD into a temporary folder, runs ``make <target>`` there (``demo``
installs the virtual environment, generates the default data and materializes the whole graph;
``completejourney-graph`` does the same on The Complete Journey), and reads each step's
duration from the clone's Dagster instance; ``test`` is what CI runs, and then the developers'
quick path (``pytest -m "not slow"``) is timed in the same clone. Targets: ``make demo`` <= 20
minutes (README), ``make test`` <= 6 minutes and the quick path <= 90 s (issue #62), 2 cores.
Run it alone: the model steps train on a wall-clock budget.

    python -m benchmarks.bench_demo --record demo
    python -m benchmarks.bench_demo --target test --record tests
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_SECONDS = {"demo": 20 * 60, "test": 6 * 60, "quick tests": 90}
REPO = Path(__file__).resolve().parent.parent
MODEL_STEPS = (
    "tuned_baselines",
    "holdout_checkpoint",
    "trained_checkpoint",
    "model_refresh",
    "evaluation_report",
    "onnx_scoring_graph",
    "pricing_policy",
    "demand_forecast",
    "trip_forecast",
    "world_model_demand",
)


def step_seconds(home: Path) -> dict[str, float]:
    """Each model step's duration over every run of the instance at ``home``."""
    import os

    import dagster as dg

    if not home.is_dir():  # a target that ran no Dagster step (``test``)
        return {}
    os.environ["DAGSTER_HOME"] = str(home)
    instance = dg.DagsterInstance.get()
    out = {}
    for run in instance.get_runs():
        for stat in instance.get_run_step_stats(run.run_id):
            if stat.step_key in MODEL_STEPS and stat.start_time and stat.end_time:
                out[stat.step_key] = stat.end_time - stat.start_time
    return out


def _verdict(target: str, seconds: float) -> str | None:
    bound = TARGET_SECONDS.get(target)
    if bound is None:
        return None
    limit = f"{bound / 60:g} min" if bound >= 300 else f"{bound:g} s"
    return f"<= {limit}: " + ("met" if seconds <= bound else "not met")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="demo")
    ap.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    ap.add_argument("--record", metavar="AREA", help="write benchmarks/results/AREA.json")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench_demo_"))
    clone = folder / "repo"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    log = folder / "make.log"
    start = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(["make", args.target], cwd=clone, stdout=out, stderr=out)
    wall = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"make {args.target} failed:\n{''.join(log.read_text().splitlines(True)[-30:])}")
    steps = step_seconds(clone / "data" / "dagster_home")
    rows = [[f"make {args.target}, from a fresh clone", wall / 60, _verdict(args.target, wall)]]
    if args.target == "test":  # the quick path, in the clone's installed environment
        start = time.perf_counter()
        quick = [".venv/bin/python", "-m", "pytest", "-m", "not slow", "-p", "no:warnings"]
        subprocess.run(quick, cwd=clone, stdout=subprocess.DEVNULL, check=True)
        seconds = time.perf_counter() - start
        rows.append(['pytest -m "not slow"', seconds / 60, _verdict("quick tests", seconds)])
    rows += [[step, seconds / 60, None] for step, seconds in steps.items()]
    for name, minutes, verdict in rows:
        print(f"  {name:36s} {minutes:6.1f} min  {verdict or ''}")
    print(f"clone {clone}")
    if args.record:
        from benchmarks.results import commit, measured_now, record, table

        record(
            args.record,
            title=f"make {args.target} on a fresh clone",
            command=f"python -m benchmarks.bench_demo --target {args.target} "
            f"--record {args.record}",
            tables={"walls": table(["step", "minutes", "target"], rows, {"minutes": ".1f"})},
            measured=measured_now(commit(clone)),  # the clone's commit, what was measured
        )
    if not args.keep:
        subprocess.run(["rm", "-rf", str(folder)], check=False)


if __name__ == "__main__":
    main()
