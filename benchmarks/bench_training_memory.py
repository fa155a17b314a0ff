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


class RssMonitor:
    """The peak resident memory between two ``mark`` calls, sampled by a daemon thread."""

    def __init__(self, every: float = 0.1):
        self.peak, self.start, self.every = 0.0, time.perf_counter(), every
        self.marks: list[tuple[str, float]] = []  # (the log line that closed a phase, its peak)
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, memory_status("VmRSS"))
            time.sleep(self.every)

    def mark(self, message: str) -> None:
        now = memory_status("VmRSS")
        peak, self.peak = max(self.peak, now), now
        seconds = time.perf_counter() - self.start
        self.marks.append((message, peak))
        print(f"{seconds:7.1f} s  rss {now:8.0f} MiB  peak since last {peak:8.0f} MiB  {message}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warehouse", required=True)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--max-seconds", type=float, default=None, help="training budget")
    ap.add_argument("--customer-share", type=float, default=1.0)
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
    print(f"peak RSS (VmHWM) {memory_status('VmHWM'):.0f} MiB")
    if args.record:
        from benchmarks.results import record, table

        rows = [[phase, mib] for phase, mib in monitor.marks]
        rows.append(["whole run (VmHWM)", memory_status("VmHWM")])
        record(
            args.record,
            title="Training memory",
            command=f"python -m benchmarks.bench_training_memory --customer-share "
            f"{args.customer_share} --record {args.record}",
            tables={"phases": table(["phase", "peak RSS MiB"], rows, {"peak RSS MiB": ",.0f"})},
        )


if __name__ == "__main__":
    main()
