"""Benchmark: T1–T6 batch assembly (+ masking) throughput, and bytes per sample on disk.

Throughput uses a synthetic TrainingSet whose every sample has exactly H history trips
(H = 10, 100, 500), 8 products per history trip and 10 per basket, batch 256, in one process
(2 cores). Disk size reads a materialized warehouse (default: data/warehouse).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import polars as pl

from retailsim_core.datasets.tensors import PRICE_COLUMNS, TensorConfig, TrainingSet
from retailsim_core.datasets.tokens import ProductVocab, mask_items


def synthetic(n_samples: int, history: int, rng: np.random.Generator) -> TrainingSet:
    """A set whose every sample has exactly ``history`` trips of 8 products before a basket of
    10: the arrays ``TrainingSet`` gathers from, built without a warehouse."""
    import datetime as dt

    from retailsim_core.datasets.batch_inputs import TripIndex
    from retailsim_core.datasets.history_features import BasketContext

    ts = object.__new__(TrainingSet)
    vocab = ProductVocab(tuple(f"PRD{i:07d}" for i in range(5000)))
    n_trips = n_samples + history
    names = np.array(vocab.products)
    trips = pl.DataFrame(
        {
            "products": names[rng.integers(0, 5000, (n_trips, 8))].tolist(),
            "shop_date": [dt.date(2006, 1, 1) + dt.timedelta(days=7 * i) for i in range(n_trips)],
            "store_id": rng.choice(["S1", "S2", "S3"], n_trips),
            "shop_hour": rng.integers(8, 21, n_trips),
            "basket_type": rng.choice(["Top Up", "Full Shop"], n_trips),
            "basket_dominant_mission": rng.choice(["Fresh", "Grocery"], n_trips),
            "customer_id": ["C1"] * n_trips,
        }
    )
    ts.cfg, ts.vocab, ts.n = TensorConfig(max_history_trips=history), vocab, n_samples
    ts.shelf, ts.mapped = None, None
    ts.index = TripIndex.build(trips, vocab)
    ts.hist_start = np.arange(n_samples, dtype=np.int64)
    ts.full_hist_start = ts.hist_start
    ts.hist_end = ts.hist_start + history
    day = ts.index.arrays.day[ts.hist_end - 1] + 3
    ts.basket_context = BasketContext(
        start=ts.hist_start,
        end=ts.hist_end,
        day=day,
        store=ts.index.arrays.store[ts.hist_end - 1],
        hour=np.full(n_samples, 12),
        weekend=np.zeros(n_samples, bool),
    )
    ts.item_tokens = rng.integers(1, 5001, n_samples * 10).astype(np.int32)
    ts.item_prices = rng.random((n_samples * 10, len(PRICE_COLUMNS))).astype(np.float32)
    ts.item_starts = np.arange(0, n_samples * 10, 10, dtype=np.int64)
    ts.item_counts = np.full(n_samples, 10, dtype=np.int64)
    ts.customer_numeric = rng.random((n_samples, 22)).astype(np.float32)
    ts.customer_codes = rng.integers(0, 5, (n_samples, 2))
    ts.history_alpha = rng.random(n_samples).astype(np.float32)
    ts.time_context = rng.random((n_samples, 7)).astype(np.float32)
    ts.store_numeric = rng.random((n_samples, 4)).astype(np.float32)
    ts.store_codes = rng.integers(0, 5, (n_samples, 3))
    ts.store_is_new = np.zeros(n_samples, bool)
    ts.basket_labels = rng.integers(0, 4, (n_samples, 4))
    return ts


def throughput(history: int, batch: int = 256, batches: int = 20) -> float:
    rng = np.random.default_rng(0)
    ts = synthetic(batch * batches, history, rng)
    order = rng.permutation(ts.n)
    start = time.perf_counter()
    for i in range(batches):
        b = ts[order[i * batch : (i + 1) * batch]]
        mask_items(b["tokens"].numpy(), ts.vocab, 0.15, rng)
    return batch * batches / (time.perf_counter() - start)


def disk_bytes_per_sample(warehouse: Path) -> tuple[float, int]:
    """Bytes on disk per training sample: the samples and the trip store they point into."""
    from retailsim_core.storage.warehouse import Warehouse

    wh = Warehouse(warehouse)
    size = sum(
        p.stat().st_size for t in ("bucketed_samples", "customer_trips") for p in wh.files(t)
    )
    n = wh.scan("bucketed_samples").select(pl.len()).collect().item()
    return size / max(n, 1), n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--warehouse", type=Path, default=Path("data/warehouse"))
    ap.add_argument("--record", action="store_true", help="write results/dataloader.json")
    args = ap.parse_args()
    rates = []
    for h in (10, 100, 500):
        rates.append([h, throughput(h)])
        print(
            f"history {h:>3} trips: {rates[-1][1]:>9,.0f} samples/s (batch 256, with masking)",
            flush=True,
        )
    if args.record:
        from benchmarks.results import record, table

        record(
            "dataloader",
            title="Training batches",
            command="python -m benchmarks.bench_dataloader --record",
            tables={
                "throughput": table(["history trips", "samples/s"], rates, {"samples/s": ",.0f"})
            },
        )
    if (args.warehouse / "bucketed_samples").exists():
        per, n = disk_bytes_per_sample(args.warehouse)
        print(
            f"disk: {per:,.0f} bytes per sample ({n:,} samples; samples + trip store, histories "
            "not copied); "
            f"spec layout: 68 GB / 47M samples = {68e9 / 47e6:,.0f} bytes per sample"
        )


if __name__ == "__main__":
    main()
