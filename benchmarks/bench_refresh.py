"""Benchmark: one week's model refresh, from reading the warehouse to the published partition.

Runs ``model_refresh`` for ``--week`` (its previous partition, or the trained checkpoint at the
last validation week, must exist) in this process, as the asset's step does, and reports the
wall time split into reading the inputs and the fine-tuning, and the peak resident memory.
Target (issue #60): a week on The Complete Journey <= 60 s on 2 cores.

    python -m benchmarks.bench_refresh --warehouse <warehouse> --week 44 --record refresh_cj
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

TARGET_SECONDS = 60.0


def main() -> None:
    from retailsim_core.pipeline.model_refresh import refresh_weeks
    from retailsim_core.settings import load_settings
    from retailsim_core.storage.warehouse import Warehouse
    from retailsim_core.training.adapt.refresh import RefreshConfig
    from retailsim_core.training.run.train_config import TrainConfig

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warehouse", type=Path, required=True)
    ap.add_argument("--week", type=int, required=True)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--record", metavar="AREA", help="write benchmarks/results/AREA.json")
    args = ap.parse_args()
    settings = load_settings()
    wh = Warehouse(args.warehouse, calendar=settings.calendar)
    marks: list[tuple[str, float]] = []
    start = time.perf_counter()

    def log(message: str) -> None:
        marks.append((message, time.perf_counter() - start))
        print(f"{marks[-1][1]:7.1f} s  {message}", flush=True)

    summary = refresh_weeks(
        wh, settings.split, [args.week], TrainConfig.preset(args.preset), RefreshConfig(), log
    )[0]
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    tuning = summary.get("seconds", 0.0)
    verdict = f"<= {TARGET_SECONDS:g} s: " + ("met" if wall <= TARGET_SECONDS else "not met")
    print(
        f"week {args.week}: {wall:.1f} s ({verdict}), fine-tuning {tuning} s, peak {peak:.0f} MiB"
    )
    if args.record:
        from benchmarks.results import record, table

        rows = [
            [f"refresh of week {args.week}, whole step, s", round(wall, 1), verdict],
            ["of which fine-tuning, s", tuning, None],
            ["new samples", summary.get("new_samples"), None],
            ["replayed samples", summary.get("replay_samples"), None],
            ["peak RSS MiB", round(peak), None],
        ]
        record(
            args.record,
            title="One week's model refresh",
            command=f"python -m benchmarks.bench_refresh --week {args.week} --record {args.record}",
            tables={"refresh": table(["figure", "value", "target"], rows)},
        )


if __name__ == "__main__":
    main()
