"""Benchmark: peak memory of ``trained_checkpoint`` (``train_world_model``), phase by phase.

Runs the training of a materialized warehouse in this process (the asset's code path, the
``small`` preset unless told) and samples the process's resident memory every 0.1 s: each line
of the training's log is printed with the resident memory at that moment and the peak since the
previous line, so the peak is attributed to the phase that reached it. The last line is the
whole run's peak (``VmHWM``). ``--customer-share`` trains on a seeded share of the customers
(the training's own ``customer_share``): the training baskets grow with the share while the
warehouse stays the same. Issue #37's targets at ``large``: peak <= 6 GB, and <= 20% more when
the training baskets double.

    python benchmarks/bench_training_memory.py --warehouse data/bench/large/wh --max-seconds 60
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import threading
import time
from pathlib import Path


def memory_status(field: str) -> float:
    """A ``/proc/self/status`` memory field in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


# The phase a log line closes, by its start (first match); the training's own lines.
PHASES = (
    ("start", "start"),
    ("trip store", "trip store"),
    ("shelf", "shelf and T4 rows"),
    ("tensors", "training sets built"),
    ("own-depth responses", "response priors"),
    ("plan responses", "response priors"),
    ("  epoch 1 (", "to the first batch (popularity, scaling)"),
    ("  epoch", "training (batches)"),
    ("  budget", "training (batches)"),
    ("epoch", "training (batches)"),
    ("size head", "size calibration"),
    ("done", "checkpoint written"),
)


def phase_of(message: str, seen: set[str]) -> str:
    """The phase ``message`` closes: the first batch's line closes "to the first batch" once."""
    for prefix, phase in PHASES:
        if message.startswith(prefix) and not (phase.startswith("to the first") and phase in seen):
            return phase
    return "other"


class RssMonitor:
    """Peaks of resident (``VmRSS``) and anonymous (``RssAnon``) memory between two ``mark``
    calls, sampled by a daemon thread. Resident memory counts the pages of memory-mapped files
    (the trip store, the training sets) that a pass touched: page cache the kernel takes back
    when memory is short. Anonymous memory is what the process cannot give back."""

    def __init__(self, every: float = 0.1):
        self.peak, self.anon, self.start, self.every = 0.0, 0.0, time.perf_counter(), every
        self.phases: dict[str, list[float]] = {}  # phase: [peak RSS, peak anonymous] MiB
        self.marks: list[tuple[str, float]] = []  # (the log line that closed a phase, peak RSS)
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, memory_status("VmRSS"))
            self.anon = max(self.anon, memory_status("RssAnon"))
            time.sleep(self.every)

    def mark(self, message: str) -> None:
        now, anon = memory_status("VmRSS"), memory_status("RssAnon")
        peak, self.peak = max(self.peak, now), now
        peak_anon, self.anon = max(self.anon, anon), anon
        self.marks.append((message, peak))
        phase = phase_of(message, set(self.phases))
        old = self.phases.get(phase, [0.0, 0.0])
        self.phases[phase] = [max(old[0], peak), max(old[1], peak_anon)]
        seconds = time.perf_counter() - self.start
        print(
            f"{seconds:7.1f} s  rss {now:8.0f} MiB  peak since last {peak:8.0f} MiB  "
            f"anonymous {peak_anon:8.0f} MiB  {message}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warehouse", required=True)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--max-seconds", type=float, default=None, help="training budget")
    ap.add_argument("--customer-share", type=float, default=1.0)
    ap.add_argument("--label", help="the warehouse's name in the title (default its folder's)")
    ap.add_argument("--record", metavar="AREA", help="write benchmarks/results/AREA.json")
    args = ap.parse_args()
    from retailsim_core.models.world_model import WorldModelConfig
    from retailsim_core.pipeline.world_model_training import train_world_model
    from retailsim_core.settings import load_settings
    from retailsim_core.storage.warehouse import Warehouse
    from retailsim_core.training.run.train_config import TrainConfig

    monitor = RssMonitor()
    train_cfg = TrainConfig.preset(args.preset)
    if args.max_seconds is not None:
        train_cfg = dataclasses.replace(train_cfg, max_seconds=args.max_seconds)
    monitor.mark("start")
    with tempfile.TemporaryDirectory() as folder:
        summary = train_world_model(
            Warehouse(Path(args.warehouse)),
            load_settings().split,
            WorldModelConfig.preset(args.preset),
            train_cfg,
            log=monitor.mark,
            folder=Path(folder),
            customer_share=args.customer_share,
        )
    monitor.mark(f"done: {summary.train_samples:,} training samples, {summary.epochs} epochs")
    whole = [memory_status("VmHWM"), max(anon for _, anon in monitor.phases.values())]
    print(f"peak RSS (VmHWM) {whole[0]:.0f} MiB, peak anonymous {whole[1]:.0f} MiB")
    if args.record:
        from benchmarks.results import record, table

        rows = [[phase, *peaks] for phase, peaks in monitor.phases.items()]
        rows.append(["whole run (VmHWM; sampled anonymous peak)", *whole])
        columns = ["phase", "peak RSS MiB", "peak anonymous MiB"]
        budget = "" if args.max_seconds is None else f" --max-seconds {args.max_seconds:g}"
        record(
            args.record,
            title=f"Training memory, {args.label or Path(args.warehouse).name}: "
            f"{summary.train_samples:,} training samples",
            command="python -m benchmarks.bench_training_memory --warehouse <warehouse>"
            f"{budget}"
            f" --customer-share {args.customer_share} --record {args.record}",
            tables={
                "phases": table(columns, rows, {c: ",.0f" for c in columns[1:]}),
            },
        )


if __name__ == "__main__":
    main()
