"""Benchmark: how long a finished step holds its executor slot while the parent reads its events,
under Dagster's multiprocess executor and the project's (``retailsim_dagster.executor``).

A job of three steps: ``chatty`` yields ``--events`` materializations (a partitioned step's end:
one per week and output), ``quiet`` sleeps ``--quiet`` seconds without an event (GraphSAGE
training), ``after`` needs ``chatty``. The figure is ``after``'s launch minus ``chatty``'s
``STEP_SUCCESS``: the time the parent took to drain ``chatty``'s queue beside a quiet step.

    python benchmarks/bench_executor.py [--events 600] [--quiet 20]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import dagster as dg
from dagster._core.definitions.executor_definition import multiprocess_executor

from retailsim_dagster.executor import prompt_multiprocess_executor

EVENTS = int(os.environ.get("BENCH_EXECUTOR_EVENTS", "600"))
QUIET = float(os.environ.get("BENCH_EXECUTOR_QUIET", "20"))


@dg.op(out=dg.Out(dg.Nothing))
def chatty():
    for week in range(EVENTS):
        yield dg.AssetMaterialization(asset_key=f"week_{week}")
    yield dg.Output(None)


@dg.op
def quiet():
    time.sleep(QUIET)


@dg.op(ins={"start": dg.In(dg.Nothing)})
def after():
    return None


@dg.graph
def three_steps():
    after(start=chatty())
    quiet()


def dagster_job():
    return three_steps.to_job(name="dagster_executor", executor_def=multiprocess_executor)


def project_job():
    return three_steps.to_job(name="project_executor", executor_def=prompt_multiprocess_executor)


def slot_hold(job_fn) -> tuple[float, float]:
    """(seconds from chatty's success to after's launch, the run's seconds)."""
    with tempfile.TemporaryDirectory() as home, dg.instance_for_test(temp_dir=home) as instance:
        start = time.perf_counter()
        result = dg.execute_job(dg.reconstructable(job_fn), instance=instance)
        wall = time.perf_counter() - start
        assert result.success
        logs = instance.all_logs(result.run_id)

    def at(step: str, kind: str) -> float:
        return next(
            e.timestamp for e in logs if e.step_key == step and e.dagster_event_type == kind
        )

    return at("after", "STEP_WORKER_STARTING") - at("chatty", "STEP_SUCCESS"), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=EVENTS)
    ap.add_argument("--quiet", type=float, default=QUIET)
    args = ap.parse_args()
    # The ops read them when the step processes import this module.
    os.environ["BENCH_EXECUTOR_EVENTS"], os.environ["BENCH_EXECUTOR_QUIET"] = (
        str(args.events),
        str(args.quiet),
    )
    print(f"{args.events} events from one step beside a step quiet for {args.quiet:g} s")
    for name, job_fn in (("Dagster's executor", dagster_job), ("project's", project_job)):
        hold, wall = slot_hold(job_fn)
        print(f"  {name:20s} slot held {hold:6.2f} s after the step's success; run {wall:5.1f} s")


if __name__ == "__main__":
    main()
