"""Benchmark: GraphSAGE training time and peak memory on CPU.

Two graphs: the default demo data's product graph (from a materialized warehouse) and a
synthetic graph at the spec's scale — 5,000 products + 300 categories, ~850K edges
(400K co-purchase, 150K substitution, 300K hierarchy; design §2.3.2). Each runs in its own
process so peak memory is its own.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch


def spec_scale_inputs(seed: int = 0):
    from retailsim_core.models.gnn.graphsage import NodeIds

    g = torch.Generator().manual_seed(seed)
    n_prod, n_cat = 5_000, 300
    n = n_prod + n_cat

    def rand(k, lo, hi):
        return torch.randint(lo, hi, (k,), generator=g)

    edges = {
        "copurchase": (
            rand(400_000, 0, n_prod),
            rand(400_000, 0, n_prod),
            1.5 + 3 * torch.rand(400_000, generator=g),
        ),
        "substitution": (
            rand(150_000, 0, n_prod),
            rand(150_000, 0, n_prod),
            torch.rand(150_000, generator=g),
        ),
        "hierarchy": (rand(300_000, 0, n), rand(300_000, n_prod, n), torch.full((300_000,), 0.5)),
    }
    ids = NodeIds(
        sku=torch.cat([torch.arange(1, n_prod + 1), torch.zeros(n_cat, dtype=torch.long)]),
        brand=torch.cat([rand(n_prod, 1, 801), torch.zeros(n_cat, dtype=torch.long)]),
        category=torch.cat([rand(n_prod, 0, n_cat), torch.arange(n_cat)]),
        tier=torch.cat([rand(n_prod, 0, 3), torch.full((n_cat,), 3)]),
    )
    return ids, edges, (n_prod, 800, n_cat), n


def run(case: str, warehouse: Path, epochs: int) -> dict:
    from retailsim_core.models.gnn.graphsage import GraphSAGEConfig, model_graph, train

    cfg = GraphSAGEConfig(epochs=epochs)
    if case == "default":
        import polars as pl

        from retailsim_core.graph.product_embeddings import graph_inputs
        from retailsim_core.pipeline.data.graph_tables import load_graph
        from retailsim_core.storage.warehouse import Warehouse

        wh = Warehouse(warehouse)
        graph = load_graph(wh)
        nodes, ids, edges, sizes = graph_inputs(
            graph, pl.read_parquet(wh.table_dir("pseudo_brands") / "part-0.parquet")
        )
        n = nodes.height
    else:
        ids, edges, sizes, n = spec_scale_inputs()
    graphs = model_graph(edges, n)
    start = time.perf_counter()
    _, losses = train(graphs, ids, edges, sizes, cfg)
    seconds = time.perf_counter() - start
    return {
        "case": case,
        "nodes": n,
        "edges": sum(len(e[0]) for e in edges.values()),
        "epochs": epochs,
        "seconds": round(seconds, 1),
        "seconds_per_epoch": round(seconds / epochs, 2),
        "final_loss": round(losses[-1], 4),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--case", choices=["default", "spec_scale"])
    ap.add_argument("--warehouse", type=Path, default=Path("data/warehouse"))
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--record", action="store_true", help="write results/graphsage.json")
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run(args.case, args.warehouse, args.epochs)))
        return
    rows = []
    for case in ("default", "spec_scale"):
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--case",
                case,
                "--warehouse",
                str(args.warehouse),
                "--epochs",
                str(args.epochs),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        print(out.stdout.strip().splitlines()[-1], flush=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    if args.record:
        from benchmarks.results import record, table

        keys = list(rows[0])
        record(
            "graphsage",
            title="GraphSAGE",
            command=f"python -m benchmarks.bench_graphsage --epochs {args.epochs} --record",
            tables={"cases": table(keys, [[r.get(k) for k in keys] for r in rows])},
        )


if __name__ == "__main__":
    main()
