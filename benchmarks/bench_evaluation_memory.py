"""Benchmark: peak memory and time of ``evaluation_report`` (``evaluate``), stage by stage.

Runs the evaluation of a materialized warehouse in this process (the asset's code path and
settings: ``RETAILSIM_SOURCE``, ``RETAILSIM_WAREHOUSE_DIR``, ``RETAILSIM_TRUTH_DIR``), writing
its report to a temporary folder, and samples the resident memory every 0.1 s
(``bench_training_memory.RssMonitor``): each log line closes a phase, and the phases are
summed into the evaluation's stages (scoring every method, the price checks, the promotion
events). The last row is the whole run's peak (``VmHWM``). Issue #62's targets: peak <= 4 GB on
the real LGSR sample and on The Complete Journey, <= 3 minutes on the real sample.

    RETAILSIM_SOURCE=completejourney RETAILSIM_WAREHOUSE_DIR=... RETAILSIM_TRUTH_DIR= \\
        python -m benchmarks.bench_evaluation_memory --record complete_journey_evaluation_memory
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks.bench_training_memory import RssMonitor, memory_status

STAGES = (  # a log line's start -> the stage it closes
    ("evaluated", "scoring: every method, in chunks"),
    ("elasticities", "price checks: elasticities, simulation, held-out response"),
    ("promotion events", "promotion-event check"),
)


def stages(marks: list[tuple[str, float, float]]) -> list[list]:
    """(stage, seconds, peak MiB) rows: consecutive phases of one stage summed (seconds) and
    maxed (peak); a line of no stage is its own row."""
    rows: list[list] = []
    for message, seconds, peak in marks:
        name = next((s for prefix, s in STAGES if message.startswith(prefix)), message[:60])
        if rows and rows[-1][0] == name:
            rows[-1][1] += seconds
            rows[-1][2] = max(rows[-1][2], peak)
        else:
            rows.append([name, seconds, peak])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--test-samples", type=int, default=6_000, help="as the asset's default")
    ap.add_argument("--record", metavar="AREA", help="write benchmarks/results/AREA.json")
    args = ap.parse_args()
    from retailsim_core.baselines.sequential import SequentialConfig
    from retailsim_core.next_basket.eval_config import EvalConfig
    from retailsim_core.pipeline.evaluation_run import evaluate
    from retailsim_core.settings import load_settings
    from retailsim_core.storage.warehouse import Warehouse

    settings = load_settings()
    cfg = EvalConfig(
        max_test_samples=args.test_samples or None,
        sequential=SequentialConfig(max_seconds=float(settings.sequential_seconds)),
    )
    monitor, timed, last = RssMonitor(), [], time.perf_counter()

    def log(message: str) -> None:
        nonlocal last
        monitor.mark(message)
        now = time.perf_counter()
        timed.append((message, now - last, monitor.marks[-1][1]))
        last = now

    log("start")
    warehouse = Warehouse(settings.warehouse_dir, settings.calendar)
    with tempfile.TemporaryDirectory() as folder:
        evaluate(warehouse, settings.split, settings.truth, cfg, log=log, folder=Path(folder))
    log("done: report written")
    wall, peak = sum(s for _, s, _ in timed), memory_status("VmHWM")
    print(f"{wall:.0f} s, peak RSS (VmHWM) {peak:.0f} MiB")
    if args.record:
        from benchmarks.results import record, table

        rows = stages(timed) + [["whole evaluation (VmHWM)", wall, peak]]
        record(
            args.record,
            title="Evaluation memory",
            command=f"python -m benchmarks.bench_evaluation_memory --record {args.record}",
            tables={
                "stages": table(
                    ["stage", "seconds", "peak RSS MiB"],
                    rows,
                    {"seconds": ",.0f", "peak RSS MiB": ",.0f"},
                )
            },
        )


if __name__ == "__main__":
    main()
