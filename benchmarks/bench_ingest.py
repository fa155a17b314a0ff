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
    args = ap.parse_args()
    raw, truth, wh = (args.root / args.preset / d for d in ("raw", "ground_truth", "warehouse"))
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cpus, python {platform.python_version()}"
    )
    if not any(raw.glob("transactions_*.csv*")):
        report = generate(preset(args.preset), raw, truth)
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


if __name__ == "__main__":
    main()
