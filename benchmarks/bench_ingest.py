"""Benchmark: synthetic generation and LGSR ingestion throughput.

Prints figures (and appends nothing anywhere): run `make bench` or
`python benchmarks/bench_ingest.py --preset large` and copy them into docs/benchmarks.md.
The large preset (>= 30M rows) is generated once under data/bench/ and reused.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import time
from pathlib import Path

from retailsim_core.calendar import N_WEEKS
from retailsim_core.pipeline.data.ingest_weeks import ingest_weeks
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.synth import preset
from retailsim_core.synth.writer import generate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="large")
    ap.add_argument("--weeks", type=int, default=N_WEEKS, help="ingest the first N weeks")
    ap.add_argument("--root", type=Path, default=Path("data/bench"))
    ap.add_argument("--record", action="store_true", help="write benchmarks/results/ingest.json")
    args = ap.parse_args()
    raw, truth, wh = (args.root / args.preset / d for d in ("raw", "ground_truth", "warehouse"))
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cpus, python {platform.python_version()}"
    )
    rows_out = []
    if not any(raw.glob("transactions_*.csv*")):
        report = generate(preset(args.preset), raw, truth)
        rows_out.append(
            [
                f"generation, {args.preset}",
                report.rows,
                report.seconds,
                report.rows / report.seconds,
                None,
            ]
        )
        print(
            f"generate {args.preset}: {report.rows:,} rows, {report.baskets:,} baskets, "
            f"{report.files} files in {report.seconds:.1f}s ({report.rows / report.seconds:,.0f} "
            "rows/s)"
        )
    shutil.rmtree(wh, ignore_errors=True)
    weeks = range(1, args.weeks + 1)
    start = time.perf_counter()
    report, _ = ingest_weeks(raw, Warehouse(wh), weeks)
    seconds = time.perf_counter() - start
    rows = int(report["rows_read"].sum())
    size = sum(p.stat().st_size for p in raw.glob("transactions_*")) / 2**20
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(
        f"ingest {args.preset}: {rows:,} rows ({size:,.0f} MiB CSV) in {seconds:.1f}s "
        f"= {rows / seconds:,.0f} rows/s; slowest week {report['seconds'].max():.2f}s; "
        f"peak RSS {peak:,.0f} MiB"
    )
    rows_out.append(
        [f"ingestion, {args.preset}, {args.weeks} weeks", rows, seconds, rows / seconds, peak]
    )
    if args.record:
        from benchmarks.results import record, table

        cols = ["step", "rows", "wall s", "rows/s", "peak RSS MiB"]
        fmts = {"wall s": ".1f", "rows/s": ",.0f", "peak RSS MiB": ",.0f"}
        record(
            "ingest",
            title="Generation and ingestion",
            command=f"python -m benchmarks.bench_ingest --preset {args.preset} --record",
            tables={"steps": table(cols, rows_out, fmts)},
        )


if __name__ == "__main__":
    main()
