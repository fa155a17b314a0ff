"""Benchmark: the data-pipeline assets on an ingested warehouse (default: the large preset).

Each stage runs in its own process so its peak memory is its own. ``derived_prices`` counts
the dense cells it derives (it stores the observed ones, D96); ``shelf_read`` materialises every
week's dense shelf and price features from them, as every shelf reader does. Run
`python benchmarks/bench_ingest.py --preset large` first (it leaves data/bench/large/warehouse).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

# ``shelf_read``: what every reader of a week's whole shelf pays (D96): the dense tables and
# price features of all weeks, replayed from the stored observed cells.
STAGES = ("derived_prices", "shelf_read", "product_graph", "customer_snapshots")


def run_stage(stage: str, root: Path) -> dict:
    from retailsim_core.pipeline.data.graph_tables import build_product_graph, write_graph
    from retailsim_core.pipeline.data.price_weeks import derive_price_weeks
    from retailsim_core.pipeline.data.snapshot_weeks import snapshot_weeks
    from retailsim_core.pipeline.readers.price_reader import price_weeks
    from retailsim_core.split import TemporalSplit
    from retailsim_core.storage.warehouse import Warehouse

    wh = Warehouse(root)
    weeks = range(1, 118)
    rows_in = wh.scan("raw_transactions").select(pl.len()).collect().item()
    start = time.perf_counter()
    if stage == "derived_prices":
        summary = derive_price_weeks(wh, weeks)
        rows_out = int(summary["cells"].sum())
    elif stage == "shelf_read":
        rows_in = wh.scan("derived_prices").select(pl.len()).collect().item()  # stored rows
        rows_out = sum(w.features.height for w in price_weeks(wh, weeks, features=True))
    elif stage == "product_graph":
        graph = build_product_graph(wh, TemporalSplit())
        write_graph(wh, graph)
        rows_in = (
            wh.scan("raw_transactions", TemporalSplit().train_weeks)
            .select(pl.len())
            .collect()
            .item()
        )
        rows_out = graph.edges.height
    else:
        summary = snapshot_weeks(wh, weeks)
        rows_out = int(summary["customers"].sum()) * 2
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    return {
        "stage": stage,
        "rows_in": rows_in,
        "rows_out": rows_out,
        "seconds": round(seconds, 1),
        "rows_in_per_s": round(rows_in / seconds),
        "peak_rss_mib": round(peak),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--warehouse", type=Path, default=Path("data/bench/large/warehouse"))
    ap.add_argument("--stage", choices=STAGES)
    ap.add_argument("--record", action="store_true", help="write results/pipeline_large.json")
    args = ap.parse_args()
    if args.stage:
        print(json.dumps(run_stage(args.stage, args.warehouse)))
        return
    rows = []
    for stage in STAGES:
        out = subprocess.run(
            [sys.executable, __file__, "--stage", stage, "--warehouse", str(args.warehouse)],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"{r['stage']:20s} {r['rows_in']:>12,} rows in  {r['rows_out']:>13,} rows out  "
            f"{r['seconds']:>7.1f} s  {r['rows_in_per_s']:>10,} rows/s  peak "
            f"{r['peak_rss_mib']:,} MiB",
            flush=True,
        )
        rows.append(
            [
                r["stage"],
                r["rows_in"],
                r["rows_out"],
                r["seconds"],
                r["rows_in_per_s"],
                r["peak_rss_mib"],
            ]
        )
    if args.record:
        from benchmarks.results import record, table

        cols = ["stage", "rows in", "rows out", "wall s", "input rows/s", "peak RSS MiB"]
        record(
            "pipeline_large",
            title="Data pipeline at large",
            command="python -m benchmarks.bench_pipeline --record",
            tables={"stages": table(cols, rows, {"wall s": ".1f"})},
        )


if __name__ == "__main__":
    main()
