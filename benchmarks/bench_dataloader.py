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

from retailsim_core.datasets.tensors import TensorConfig, TrainingSet
from retailsim_core.datasets.tokens import ProductVocab, mask_items


def synthetic(n_samples: int, history: int, rng: np.random.Generator) -> TrainingSet:
    ts = object.__new__(TrainingSet)  # arrays only: no warehouse needed
    vocab = ProductVocab(tuple(f"PRD{i:07d}" for i in range(5000)))
    n_trips = n_samples + history
    ts.cfg, ts.vocab, ts.n = TensorConfig(max_history_trips=history), vocab, n_samples
    ts.trip_tokens = rng.integers(1, 5001, n_trips * 8).astype(np.int32)
    ts.trip_offsets = np.arange(0, n_trips * 8 + 1, 8, dtype=np.int64)
    ts.trip_day = np.arange(n_trips, dtype=np.int32) * 7
    ts.trip_context = rng.integers(1, 5, (n_trips, 2))
    ts.hist_start = np.arange(n_samples, dtype=np.int64)
    ts.hist_end = ts.hist_start + history
    ts.basket_day = ts.trip_day[ts.hist_end - 1] + 3
    ts.item_tokens = rng.integers(1, 5001, n_samples * 10).astype(np.int32)
    ts.item_prices = rng.random((n_samples * 10, 9)).astype(np.float32)
    ts.item_starts = np.arange(0, n_samples * 10, 10, dtype=np.int64)
    ts.item_counts = np.full(n_samples, 10, dtype=np.int64)
    ts.customer_numeric, ts.customer_codes = (
        rng.random((n_samples, 22)).astype(np.float32),
        rng.integers(0, 5, (n_samples, 2)),
    )
    ts.history_alpha, ts.has_snapshot = (
        rng.random(n_samples).astype(np.float32),
        np.ones(n_samples, bool),
    )
    ts.time_context = rng.random((n_samples, 7)).astype(np.float32)
    ts.store_numeric, ts.store_codes = (
        rng.random((n_samples, 4)).astype(np.float32),
        rng.integers(0, 5, (n_samples, 3)),
    )
    ts.store_is_new, ts.basket_labels = (
        np.zeros(n_samples, bool),
        rng.integers(0, 4, (n_samples, 4)),
    )
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
    import polars as pl

    def size(t):
        return sum(p.stat().st_size for p in (warehouse / t).glob("week=*/part-0.parquet"))

    n = (
        pl.scan_parquet(str(warehouse / "bucketed_samples" / "*" / "part-0.parquet"))
        .select(pl.len())
        .collect()
        .item()
    )
    return (size("bucketed_samples") + size("customer_trips")) / max(n, 1), n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--warehouse", type=Path, default=Path("data/warehouse"))
    args = ap.parse_args()
    for h in (10, 100, 500):
        print(
            f"history {h:>3} trips: {throughput(h):>9,.0f} samples/s (batch 256, T1-T6 + masking)",
            flush=True,
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
