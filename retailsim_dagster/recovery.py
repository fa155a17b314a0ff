"""Recovery from runs whose process died without ending them (kill -9, out of memory, a reboot).

Such a run stays STARTED for ever and keeps its slot of the ``cpu_heavy`` pool (limit 1), so
every later run waits on that pool. ``sweep_dead_runs`` marks each run whose processes are
all gone as failed and frees the pool slots of every run that is no longer alive. It runs:

- from the command line: ``make recover`` (``python -m retailsim_dagster.recovery``);
- before ``make demo`` materializes anything;
- every minute under the daemon (``make ui``), as the ``dead_run_sweeper`` sensor.

A run is dead when no process that logged one of its events is alive on this machine (the
instance is local: SQLite under ``DAGSTER_HOME``, one machine, decision D56).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import dagster as dg

from retailsim_core.storage.io import process_alive

LIVE_STATUSES = (
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.CANCELING,
)


@dataclass(frozen=True)
class SweepResult:
    failed_runs: tuple[str, ...]  # runs marked failed: every process of theirs had died
    freed_runs: tuple[str, ...]  # runs whose pool slots or pending steps were released


def run_pids(instance: dg.DagsterInstance, run_id: str) -> set[int]:
    """Processes that logged the run's events (run worker and step workers)."""
    types = {
        dg.DagsterEventType.RUN_START,
        dg.DagsterEventType.STEP_START,
        dg.DagsterEventType.STEP_WORKER_STARTED,
        dg.DagsterEventType.ENGINE_EVENT,
    }
    events = (e.dagster_event for e in instance.all_logs(run_id, of_type=types))
    return {e.pid for e in events if e is not None and e.pid}


def sweep_dead_runs(instance: dg.DagsterInstance) -> SweepResult:
    failed = []
    for run in instance.get_runs(dg.RunsFilter(statuses=list(LIVE_STATUSES))):
        pids = run_pids(instance, run.run_id)
        if not pids or any(process_alive(p) for p in pids):
            continue  # not started by a process yet (the launcher owns it), or still working
        instance.report_run_failed(
            run,
            f"every process of this run ({sorted(pids)}) died without "
            "ending it (killed?); marked failed by retailsim recovery",
        )
        failed.append(run.run_id)
    storage = instance.event_log_storage
    holders = set(failed)
    if storage.supports_global_concurrency_limits:
        for pool in storage.get_concurrency_keys():
            info = storage.get_concurrency_info(pool)
            holders |= {s.run_id for s in info.claimed_slots}
            holders |= {s.run_id for s in info.pending_steps}
    freed = []
    for run_id in sorted(holders):
        run = instance.get_run_by_id(run_id)
        if run is None or run.status not in LIVE_STATUSES:
            storage.free_concurrency_slots_for_run(run_id)
            freed.append(run_id)
    return SweepResult(tuple(failed), tuple(freed))


@dg.sensor(minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING)
def dead_run_sweeper(context: dg.SensorEvaluationContext):
    """Marks runs whose processes died as failed and frees their pool slots (see module doc)."""
    result = sweep_dead_runs(context.instance)
    return dg.SkipReason(
        f"marked failed: {list(result.failed_runs)}; freed slots of: {list(result.freed_runs)}"
    )


def main() -> int:
    with dg.DagsterInstance.get() as instance:
        result = sweep_dead_runs(instance)
    print(f"dead runs marked failed: {len(result.failed_runs)} {list(result.failed_runs)}")
    print(f"runs whose pool slots were freed: {len(result.freed_runs)} {list(result.freed_runs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
