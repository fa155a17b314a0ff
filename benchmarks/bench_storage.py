"""Benchmark: warehouse size on disk against the gzipped input, table by table.

Sizes are the files the manifests publish (superseded versions awaiting the next write's sweep
are not counted) plus, for tables of files, every file in the table's folder. The input is
measured gzipped as users receive LGSR: a ``.csv.gz`` as is, a ``.csv`` gzipped in memory at
level 6 (``gzip``'s default). Target (issue #21): the warehouse within 10x the gzipped input.

    python benchmarks/bench_storage.py --raw data/raw --warehouse data/warehouse
"""

from __future__ import annotations

import argparse
import zlib
from pathlib import Path

from retailsim_core.ingest.raw_files import list_week_files
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import TABLES

TARGET_RATIO = 10.0


def gzipped_bytes(path: Path, chunk: int = 1 << 24) -> int:
    """Bytes of ``path`` gzipped (level 6), streamed so a large file never sits in memory."""
    if path.name.lower().endswith(".gz"):
        return path.stat().st_size
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    size = 0
    with path.open("rb") as f:
        while block := f.read(chunk):
            size += len(packer.compress(block))
    return size + len(packer.flush())


def table_bytes(warehouse: Warehouse, name: str) -> int:
    table = TABLES[name]
    if table.schema is None:  # a folder of files (checkpoint, report, ONNX graph)
        folder = warehouse.table_dir(name)
        return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    if table.weekly:
        return sum(p.stat().st_size for p in warehouse.files(name))
    path = warehouse.data_file(name)
    if path is None:
        return 0
    manifest = warehouse.manifest(name) or {}
    beside = [  # files the manifest names besides its table (the embedding vectors)
        warehouse.table_dir(name) / v for k, v in manifest.items() if k.endswith("_file")
    ]
    return path.stat().st_size + sum(p.stat().st_size for p in beside if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", default="data/raw")
    ap.add_argument("--warehouse", default="data/warehouse")
    ap.add_argument("--record", metavar="AREA", help="write benchmarks/results/AREA.json")
    args = ap.parse_args()
    files = [Path(args.raw) / f.name for f in list_week_files(Path(args.raw))]
    raw = sum(p.stat().st_size for p in files)
    gz = sum(gzipped_bytes(p) for p in files)
    wh = Warehouse(Path(args.warehouse))
    sizes = {name: table_bytes(wh, name) for name in TABLES}
    total = sum(sizes.values())
    print(f"input: {len(files)} week files, {raw / 2**20:,.1f} MiB, gzipped {gz / 2**20:,.1f} MiB")
    print(f"{'table':34s} {'MiB':>10s} {'x gzipped input':>16s}")
    for name, size in sorted(sizes.items(), key=lambda kv: -kv[1]):
        print(f"{name:34s} {size / 2**20:10.1f} {size / gz:16.2f}")
    ratio = total / gz
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    print(f"{'warehouse':34s} {total / 2**20:10.1f} {ratio:16.2f}")
    print(f"target: warehouse <= {TARGET_RATIO:g}x the gzipped input: {verdict}")
    if args.record:
        from benchmarks.results import record, table

        rows = [[n, s / 2**20, s / gz] for n, s in sorted(sizes.items(), key=lambda kv: -kv[1])]
        rows.append(["warehouse", total / 2**20, ratio])
        rows.append(["gzipped input", gz / 2**20, 1.0])
        record(
            args.record,
            title="Storage",
            command=f"python -m benchmarks.bench_storage --record {args.record}",
            tables={
                "tables": table(
                    ["table", "MiB", "× gzipped input"],
                    rows,
                    {"MiB": ",.1f", "× gzipped input": ".2f"},
                )
            },
        )


if __name__ == "__main__":
    main()
