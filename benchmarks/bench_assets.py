"""Benchmark: the asset graph through Dagster as a user runs it, time and peak memory per asset.

Materializes, with the project's executor (two steps at once) and instance settings
(``dagster.yaml``: its pool), the data and feature assets over
every week of ``--raw`` and then, with ``--model``, the model group (``tuned_baselines``,
``trained_checkpoint``, ``evaluation_report``, ``onnx_scoring_graph``, ...), each with
``dagster asset materialize`` in a subprocess, and prints each step's duration from the run's
event log and its process's peak resident memory (``VmHWM``, sampled every 0.2 s over the
run's process tree and matched to the step by the pid its ``STEP_START`` event names).
Targets (issues #21, #37, on the 3.03M-row real LGSR sample): data and feature assets <= 60 s
wall, from the run's start to the end of the last asset a model step reads (checks and assets
no model reads may run after it); ``evaluation_report`` <= 180 s.

    python benchmarks/bench_assets.py --raw <week files> --warehouse <new or existing folder>
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TARGETS = {"data and feature assets": 60.0, "evaluation_report": 180.0}
MODEL_GROUP = "model"


def asset_keys() -> tuple[list[str], list[str], set[str]]:
    """(data and feature assets, model assets, the step keys of the data and feature assets
    some model asset reads, directly or not) of the project's definitions."""
    from retailsim_dagster.definitions import defs

    graph = defs.resolve_asset_graph()
    keys = sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string())
    model = [k for k in keys if graph.get(k).group_name == MODEL_GROUP]
    data = [k for k in keys if graph.get(k).group_name != MODEL_GROUP]
    read = set().union(*(graph.get_ancestor_asset_keys(k) for k in model)) - set(model)
    feeders = {graph.get(k).assets_def.node_def.name for k in read}  # the step's key: its op
    return [k.to_user_string() for k in data], [k.to_user_string() for k in model], feeders


def inputs_ready(
    run_start: float, spans: dict[str, tuple[float, float]], feeders: set[str]
) -> tuple[float, str]:
    """(seconds from ``run_start`` to the end of the last step among ``feeders``, that step):
    when the first model step could start. The issue's figure (#37: "from the run's start to
    the first model step"); checks and assets no model reads may still run after it."""
    ends = {step: end for step, (_, end) in spans.items() if step in feeders}
    if not ends:
        raise ValueError("no step of the run materializes an asset a model asset reads")
    last = max(ends, key=ends.__getitem__)
    return ends[last] - run_start, last


class TreePeaks:
    """The peak resident memory (``VmHWM``, MiB) of every process under ``root``, sampled by a
    daemon thread until ``stop``. A process's peak is its last sample's: ``VmHWM`` only grows;
    so is its CPU time (``cpu``: user + system seconds, up to 0.2 s short of its end)."""

    def __init__(self, root: int, every: float = 0.2):
        self.root, self.every, self.peaks, self.cpu = root, every, {}, {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def stop(self) -> dict[int, float]:
        self._done.set()
        self._thread.join()
        return self.peaks

    def _sample(self) -> None:
        while not self._done.is_set():
            for pid in self._tree():
                peak = _vm_hwm(pid)
                if peak is not None:
                    self.peaks[pid] = max(self.peaks.get(pid, 0.0), peak)
                cpu = _cpu_seconds(pid)
                if cpu is not None:
                    self.cpu[pid] = max(self.cpu.get(pid, 0.0), cpu)
            self._done.wait(self.every)

    def _tree(self) -> list[int]:
        parent = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:  # the field after the parenthesised name is the state, then the ppid
                    stat = (entry / "stat").read_text()
                    parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue  # the process ended while read
        tree, frontier = [self.root], [self.root]
        while frontier:
            level = set(frontier)
            frontier = [pid for pid, ppid in parent.items() if ppid in level]
            tree += frontier
        return tree


def _vm_hwm(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process (``/proc/<pid>/stat`` fields 14 and 15)."""
    try:
        fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def materialize(
    keys: list[str],
    env: dict,
    partition_range: str | None,
    peaks: dict[int, float],
    cpu: dict[int, float],
) -> float:
    """Wall seconds of one ``dagster asset materialize``; its log goes to $DAGSTER_HOME/run.log
    (the tail is printed if the run fails). ``peaks`` gains each of its processes' peak MiB,
    ``cpu`` their CPU seconds."""
    cmd = [sys.executable, "-m", "dagster", "asset", "materialize", "-m"]
    cmd += ["retailsim_dagster.definitions", "--select", ",".join(keys)]
    if partition_range:
        cmd += ["--partition-range", partition_range]
    log = Path(env["DAGSTER_HOME"]) / "run.log"
    start = time.perf_counter()
    with log.open("a") as out:
        done = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        sampler = TreePeaks(done.pid)
        done.wait()
        peaks.update(sampler.stop())
        cpu.update(sampler.cpu)
    if done.returncode:
        sys.exit(f"materialize failed:\n{''.join(log.read_text().splitlines(True)[-30:])}")
    return time.perf_counter() - start


def _latest_runs(home: str):
    """The instance at ``home`` and its two latest runs, newest first."""
    import dagster as dg

    os.environ["DAGSTER_HOME"] = home
    instance = dg.DagsterInstance.get()
    return instance, instance.get_runs(limit=2)


def run_seconds(home: str) -> list[float]:
    """Each of the latest runs' span, its first event (the run's creation, before its plan is
    logged) to its last, oldest run first: the wall time without the CLI's start."""
    instance, runs = _latest_runs(home)
    spans = []
    for run in runs:
        logs = instance.all_logs(run.run_id)
        spans.append(logs[-1].timestamp - logs[0].timestamp)
    return spans[::-1]


def data_run_spans(home: str, with_model: bool) -> tuple[float, dict[str, tuple[float, float]]]:
    """The data run's start (its RUN_START event) and every step's (start, end)."""
    import dagster as dg

    instance, runs = _latest_runs(home)
    run = runs[1] if with_model else runs[0]  # newest first
    start = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_START)[0].timestamp
    spans = {
        stat.step_key: (stat.start_time, stat.end_time)
        for stat in instance.get_run_step_stats(run.run_id)
        if stat.start_time and stat.end_time
    }
    return start, spans


def step_stats(
    home: str, peaks: dict[int, float], cpu: dict[int, float]
) -> dict[str, tuple[float, float | None, float | None]]:
    """Every step's (duration, peak MiB, CPU seconds of its process) in the latest runs of the
    instance at ``home``; peak and CPU are None where no sample saw the step's process."""
    import dagster as dg

    instance, runs = _latest_runs(home)
    out = {}
    for run in runs:
        starts = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_START)
        pid_of = {entry.step_key: entry.dagster_event.pid for entry in starts}
        for stat in instance.get_run_step_stats(run.run_id):
            if stat.start_time and stat.end_time:
                pid = pid_of.get(stat.step_key)
                out[stat.step_key] = (stat.end_time - stat.start_time, peaks.get(pid), cpu.get(pid))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", required=True)
    ap.add_argument("--warehouse", required=True)
    ap.add_argument("--model", action="store_true", help="also the model group")
    ap.add_argument("--record", metavar="AREA", help="write benchmarks/results/AREA.json")
    args = ap.parse_args()
    from retailsim_core.calendar import week_key_of
    from retailsim_core.ingest.raw_files import list_week_files

    weeks = [f.week for f in list_week_files(Path(args.raw))]
    weeks_range = f"{week_key_of(min(weeks))}...{week_key_of(max(weeks))}"
    home = tempfile.mkdtemp(prefix="bench_assets_")
    # The project's instance settings (pools, storage), as `make` runs it.
    shutil.copy(Path(__file__).resolve().parents[1] / "dagster.yaml", Path(home) / "dagster.yaml")
    env = os.environ | {
        "DAGSTER_HOME": home,
        "RETAILSIM_RAW_DIR": str(Path(args.raw).resolve()),
        "RETAILSIM_WAREHOUSE_DIR": str(Path(args.warehouse).resolve()),
        "RETAILSIM_TRUTH_DIR": os.environ.get("RETAILSIM_TRUTH_DIR", ""),
        "DGLBACKEND": "pytorch",
    }
    data, model, feeders = asset_keys()
    peaks: dict[int, float] = {}
    cpu: dict[int, float] = {}
    walls = {"data and feature assets": materialize(data, env, weeks_range, peaks, cpu)}
    if args.model:
        walls["model assets"] = materialize(model, env, None, peaks, cpu)
    steps = step_stats(home, peaks, cpu)
    print(f"{len(weeks)} week files in {args.raw}; two steps at once (multiprocess executor)")
    print(f"  {'step':46s} {'wall':>10s} {'CPU':>10s} {'peak RSS':>12s}")
    for step, (seconds, peak, used) in sorted(steps.items(), key=lambda kv: -kv[1][0]):
        memory = "?" if peak is None else f"{peak:,.0f} MiB"
        busy = "?" if used is None else f"{used:.1f} s"
        print(f"  {step:46s} {seconds:8.1f} s {busy:>10s} {memory:>12s}")
    print(f"  {'every process (CPU seconds)':46s} {'':10s} {sum(cpu.values()):8.1f} s")
    print(f"  {'whole run (largest process)':46s} {'':10s} {max(peaks.values()):>8,.0f} MiB")
    for name, seconds in zip(list(walls), run_seconds(home), strict=True):
        print(f"{name + ': the run itself':42s} {seconds:8.1f} s")
    ready, last = inputs_ready(*data_run_spans(home, args.model), feeders)
    print(f"{'data and feature assets: CLI wall':42s} {walls['data and feature assets']:8.1f} s")
    print(f"  (the figure below: the run's start to the end of {last}, the last asset a model")
    print("  step reads; checks and assets no model reads may run after it)")
    walls["data and feature assets"] = ready
    if args.model:
        walls["evaluation_report"] = steps["evaluation_report"][0]
    for name, seconds in walls.items():
        target = TARGETS.get(name)
        verdict = (
            ""
            if target is None
            else (f"  target <= {target:g} s: {'met' if seconds <= target else 'NOT met'}")
        )
        print(f"{name:42s} {seconds:8.1f} s{verdict}")
    if args.record:
        record_assets(args, steps, walls)


def record_assets(args, steps: dict, walls: dict) -> None:
    """The headline walls with their targets, and every step's wall, CPU and peak memory."""
    from benchmarks.results import record, table

    head = [
        [
            name,
            seconds,
            None
            if name not in TARGETS
            else f"<= {TARGETS[name]:g} s: {'met' if seconds <= TARGETS[name] else 'not met'}",
        ]
        for name, seconds in walls.items()
    ]
    rows = [
        [step, seconds, used, peak]
        for step, (seconds, peak, used) in sorted(steps.items(), key=lambda kv: -kv[1][0])
    ]
    model = " --model" if args.model else ""
    record(
        args.record,
        title="The asset graph through Dagster",
        command=f"python -m benchmarks.bench_assets --raw <week files>{model} "
        f"--record {args.record}",
        tables={
            "walls": table(["figure", "wall s", "target"], head, {"wall s": ".1f"}),
            "steps": table(
                ["step", "wall s", "CPU s", "peak RSS MiB"],
                rows,
                {"wall s": ".1f", "CPU s": ".1f", "peak RSS MiB": ",.0f"},
            ),
        },
    )


if __name__ == "__main__":
    main()
