"""Benchmark: how far the world model's ranking of a customer's own products is from what its
inputs allow (issue #17, real-data target; decision D74).

About 98% of the world model's top 20 are products the customer bought before, so the next-basket
figures rest on how it orders the history products. This script puts an independent learner,
LightGBM's LambdaRank, on the same per-(customer, product) repeat features the model reads
(``HISTORY_FEATURES``), trained on training-week baskets, and scores it on validation-week
baskets. Each ranker's order replaces the model's order of the history products in the model's
own top 20 (the slots the model gives to products new to the customer stay as they are), so
only the ordering of the history is compared. Variants add what the model does not read:

- ``+hierarchy``: the same features at the sub-commodity and commodity levels (the customer's
  purchases of any product of the category; ``prod_code_40`` and ``prod_code_30``);
- ``+product``: each product's trips, buyers, share of repeat purchases and recent trips, over
  every customer's trips before the basket set's first week;
- ``+store``: what every customer bought at the basket's store in the 4 weeks before, and each
  product's recent trend (``ranker_inputs.store_recent_features``);
- ``+transition``: how often the product followed the products of the customer's last trips
  in other customers' consecutive trips (``ranker_inputs.transition_features``);
- ``+neighbours``: the product's TIFU-KNN and UP-CF@r scores for the customer, with the
  settings the ``tuned_baselines`` asset chose on validation weeks
  (``ranker_inputs.neighbour_features``);
- ``+all``: hierarchy, product, store and transition together; ``+all+neighbours`` with the
  neighbour scores too;
- ``+model``: hierarchy and product plus the model's own score (a stack; the model trained on
  the training rows, so this variant's training rows see in-sample scores).

Every feature of a basket of week W reads weeks < W only. Validation weeks only: no test week is
read. LightGBM is a dependency of the project (the demand check's baseline).

    python -m benchmarks.bench_repeat_ranker --warehouse /path/to/lgsr_warehouse  # repo root
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import polars as pl
import torch

from benchmarks.ranker_inputs import (
    LEVEL_FEATURES,
    NEIGHBOUR_FEATURES,
    PRODUCT_FEATURES,
    STORE_FEATURES,
    TRANSITION_FEATURES,
    category_maps,
    level_arrays,
    neighbour_features,
    product_stats,
    with_store_and_transition,
)
from retailsim_core.baselines.neighbour_baselines import TifuConfig, UpcfConfig
from retailsim_core.datasets.history_features import HISTORY_FEATURES, history_features
from retailsim_core.datasets.tensors import TensorConfig
from retailsim_core.datasets.tokens import PAD
from retailsim_core.next_basket.tasks import first_day_of_week
from retailsim_core.pipeline.readers.warehouse_inputs import load_model_inputs
from retailsim_core.settings import load_settings
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.training.checkpoints.checkpoint import load_model
from retailsim_core.training.scoring.metrics import ndcg_at, recall_at
from retailsim_core.training.scoring.validation import eval_batches

VARIANTS = {
    "features": (),
    "+hierarchy": ("hierarchy",),
    "+product": ("product",),
    "+store": ("store",),
    "+transition": ("transition",),
    "+neighbours": ("neighbours",),
    "+all": ("hierarchy", "product", "store", "transition"),
    "+all+neighbours": ("hierarchy", "product", "store", "transition", "neighbours"),
    "+model": ("hierarchy", "product", "model"),
}


def basket_rows(model, data, levels, stats) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One row per (basket, history product): label, model score and features; and each
    basket's model top 20 with its truth count."""
    level_idx = [HISTORY_FEATURES.index(f) for f in LEVEL_FEATURES]
    cat_arrays = {lv: level_arrays(data.trips, m) for lv, m in levels.items()}
    parts, tops = [], []
    for rows, batch in eval_batches(data, np.arange(len(data)), 512):
        products, values = batch["repeat_products"].numpy(), batch["repeat_values"].numpy()
        b, u = products.shape
        truth = np.zeros((b, data.vocab.size), dtype=bool)
        truth[np.arange(b)[:, None], batch["tokens"].numpy()] = True
        truth[:, [PAD, data.vocab.eos]] = False
        with torch.no_grad():
            scores = model.next_basket(batch)[1].numpy()  # (B, V)
        keep = products != PAD
        row_of = np.repeat(np.arange(b)[:, None], u, 1)[keep]
        cols = {
            "row": rows[row_of],
            "token": products[keep],
            "label": np.take_along_axis(truth, products, 1)[keep],
            "model": np.take_along_axis(scores, products, 1)[keep],
        }
        cols |= dict(zip(HISTORY_FEATURES, values[keep].T, strict=True))
        ctx = data.basket_context
        sub = dataclasses.replace(
            ctx, **{f.name: getattr(ctx, f.name)[rows] for f in dataclasses.fields(ctx)}
        )
        for level, arrays in cat_arrays.items():
            cat_products, cat_values = history_features(arrays, sub)
            span = int(levels[level].max()) + 1
            have = cat_products != PAD
            keys_c = (np.nonzero(have)[0] * span + cat_products[have]).astype(np.int64)
            order = np.argsort(keys_c)
            keys_p = row_of * span + levels[level][cols["token"]]
            found = cat_values[have][order][np.searchsorted(keys_c[order], keys_p)][:, level_idx]
            cols |= {f"{level}:{f}": found[:, i] for i, f in enumerate(LEVEL_FEATURES)}
        cols |= dict(zip(PRODUCT_FEATURES, stats[cols["token"]].T, strict=True))
        parts.append(pl.DataFrame(cols))
        top = np.argsort(-scores, axis=1, kind="stable")[:, :20]
        n_true = data.item_counts[rows] + data.item_oov[rows]
        hit = np.take_along_axis(truth, top, 1)
        tops.append(
            pl.DataFrame({"row": rows, "top": top.tolist(), "hit": hit.tolist(), "n_true": n_true})
        )
    return pl.concat(parts).sort("row", "token"), pl.concat(tops).sort("row")


def columns_of(variant: tuple[str, ...], frame: pl.DataFrame) -> list[str]:
    cols = list(HISTORY_FEATURES)
    if "hierarchy" in variant:
        cols += [c for c in frame.columns if ":" in c]
    if "product" in variant:
        cols += list(PRODUCT_FEATURES)
    if "store" in variant:
        cols += list(STORE_FEATURES)
    if "transition" in variant:
        cols += list(TRANSITION_FEATURES)
    if "neighbours" in variant:
        cols += list(NEIGHBOUR_FEATURES)
    return cols + (["model"] if "model" in variant else [])


def swapped_metrics(rows: pl.DataFrame, tops: pl.DataFrame, score: str) -> tuple[float, float]:
    """R@20 and NDCG@10 of the model's top 20 with its history slots refilled in ``score``
    order (ties broken by token); the slots of products new to the customer keep their hits."""
    ranked = rows.sort(["row", score, "token"], descending=[False, True, False]).select(
        "row", pl.int_range(pl.len()).over("row").alias("j"), pl.col("label").alias("refill")
    )
    slots = (
        tops.select("row", "top", "hit")
        .explode("top", "hit", empty_as_null=True)
        .with_columns(pl.int_range(pl.len()).over("row").alias("pos"))
        .join(
            rows.select("row", pl.col("token").alias("top"), pl.lit(True).alias("hist")),
            on=["row", "top"],
            how="left",
            maintain_order="left",  # the running count of history slots below reads slot order
        )
        .with_columns(pl.col("hist").fill_null(False))
        .with_columns(pl.col("hist").cum_sum().over("row").alias("j") - 1)
        .join(ranked, on=["row", "j"], how="left")
        .with_columns(pl.when("hist").then(pl.col("refill")).otherwise(pl.col("hit")).alias("hit"))
    )
    hits = slots.sort("row", "pos")["hit"].to_numpy().reshape(tops.height, -1)  # (S, 20)
    n_true = tops.sort("row")["n_true"].to_numpy()
    recall, ndcg = recall_at(hits, n_true, 20), ndcg_at(hits, n_true, 10)
    return float(recall.mean()), float(ndcg.mean())


def fit_ranker(rows: pl.DataFrame, columns: list[str], rounds: int, seed: int):
    import lightgbm as lgb  # heavy import: only the ranker needs it

    groups = rows.group_by("row", maintain_order=True).len()["len"].to_numpy()
    params = {
        "objective": "lambdarank",
        "learning_rate": 0.05,
        "num_leaves": 63,
        "min_data_in_leaf": 50,
        "feature_fraction": 0.8,
        "bagging_fraction": 0.8,
        "bagging_freq": 1,
        "lambdarank_truncation_level": 20,
        "num_threads": torch.get_num_threads(),
        "seed": seed,
        "deterministic": True,
        "verbose": -1,
    }
    train = lgb.Dataset(
        rows.select(columns).to_numpy(), rows["label"].to_numpy().astype(np.int32), group=groups
    )
    return lgb.train(params, train, num_boost_round=rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warehouse", type=Path, default=Path("data/warehouse"))
    parser.add_argument("--checkpoint", type=Path, help="default: the warehouse's")
    parser.add_argument("--train-baskets", type=int, default=40_000)
    parser.add_argument("--train-from-week", type=int, default=40)
    parser.add_argument("--valid-baskets", type=int, default=8_000)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--record", metavar="AREA", help="write benchmarks/results/AREA.json")
    args = parser.parse_args()
    start = time.perf_counter()
    warehouse, split = Warehouse(args.warehouse), load_settings().split
    inputs = load_model_inputs(warehouse, range(1, split.valid_end + 1))
    model, _, _ = load_model(args.checkpoint or warehouse.table_dir("trained_checkpoint"))
    levels = category_maps(warehouse, inputs.vocab, range(1, split.valid_end + 1))
    usable = inputs.samples.filter(~pl.col("truncated"))
    trip_week = inputs.store.trips["week"].to_numpy()
    extra = any({"store", "transition"} & set(VARIANTS[v]) for v in args.variants)
    neighbours = any("neighbours" in VARIANTS[v] for v in args.variants)
    if neighbours:  # the settings the tuned_baselines asset chose on validation weeks
        tuned = json.loads((warehouse.table_dir("tuned_baselines") / "tuning.json").read_text())
    rng = np.random.default_rng(args.seed)
    sets = {}
    for name, frame, first_week, n in (
        (
            "train",
            usable.filter((pl.col("split") == "train") & (pl.col("week") >= args.train_from_week)),
            args.train_from_week,
            args.train_baskets,
        ),
        (
            "validation",
            usable.filter(pl.col("split") == "validation"),
            split.train_end + 1,
            args.valid_baskets,
        ),
    ):
        chosen = frame[np.sort(rng.choice(frame.height, min(n, frame.height), replace=False))]
        data = inputs.training_set(chosen, TensorConfig(max_history_trips=50))
        stats = product_stats(inputs.store.trips, inputs.vocab, first_week)
        rows, tops = basket_rows(model, data, levels, stats)
        if extra:  # only the variants that read them pay for them
            rows = with_store_and_transition(
                rows, data, chosen["week"].to_numpy(), trip_week, first_week
            )
        if neighbours:
            rows = neighbour_features(
                rows,
                data,
                first_day_of_week(inputs.store.trips, first_week),
                TifuConfig(**tuned["tifu"]),
                UpcfConfig(**tuned["upcf"]),
            )
        sets[name] = rows, tops
        print(
            f"{name}: {len(data):,} baskets, {sets[name][0].height:,} (basket, history "
            f"product) rows, {time.perf_counter() - start:.0f}s",
            flush=True,
        )
    rows, tops = sets["validation"]
    ranked = [
        ["world model", *swapped_metrics(rows, tops, "model")],
        ["personal count", *swapped_metrics(rows, tops, "log_count")],
    ]
    print(
        f"world model: R@20 {swapped_metrics(rows, tops, 'model')[0]:.4f}, NDCG@10 "
        f"{swapped_metrics(rows, tops, 'model')[1]:.4f}; personal count "
        "R@20 {:.4f}, NDCG@10 {:.4f}".format(*swapped_metrics(rows, tops, "log_count"))
    )
    for variant in args.variants:
        columns = columns_of(VARIANTS[variant], rows)
        ranker = fit_ranker(sets["train"][0], columns, args.rounds, args.seed)
        scored = rows.with_columns(
            pl.Series("ranker", ranker.predict(rows.select(columns).to_numpy()))
        )
        recall, ndcg = swapped_metrics(scored, tops, "ranker")
        ranked.append([f"LambdaRank, {variant} ({len(columns)} features)", recall, ndcg])
        gain = sorted(zip(ranker.feature_importance("gain"), columns, strict=True), reverse=True)[
            :5
        ]
        print(
            f"LambdaRank {variant} ({len(columns)} features): R@20 {recall:.4f}, NDCG@10 "
            f"{ndcg:.4f}; top gain: {', '.join(c for _, c in gain)} "
            f"({time.perf_counter() - start:.0f}s)",
            flush=True,
        )
    if args.record:
        from benchmarks.results import record, table

        record(
            args.record,
            title="Repeat ranking against an independent ranker",
            command=f"python -m benchmarks.bench_repeat_ranker --record {args.record}",
            tables={
                "rankers": table(
                    ["ranking of the history products", "R@20", "NDCG@10"],
                    ranked,
                    {"R@20": ".4f", "NDCG@10": ".4f"},
                )
            },
        )


if __name__ == "__main__":
    main()
