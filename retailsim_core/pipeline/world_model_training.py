"""``trained_checkpoint``: build the tensors of the train/validation weeks from the warehouse,
train the world model (``training.loop``), write safetensors + JSON atomically.

The product vocabulary is the GraphSAGE id map's products (every product of the catalogue, each
with its embedding row), so samples, embedding rows, the output head and evaluation share one
token order (decision D38). Loading a checkpoint never unpickles: ``load_model`` reads
``model.safetensors`` and ``config.json`` only.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import torch

from retailsim_core.datasets.tensors import TensorConfig
from retailsim_core.datasets.tokens import ProductVocab
from retailsim_core.datasets.trips import TripStore
from retailsim_core.models.heads.products import PriceResponse
from retailsim_core.models.world_model import WorldModel, WorldModelConfig, parameter_count
from retailsim_core.pipeline.data.price_weeks import regional_cuts
from retailsim_core.pipeline.readers.warehouse_inputs import load_model_inputs, promotion_plan
from retailsim_core.response.response_prior import (
    depth_responses,
    plan_lifts,
    start_depth_responses,
    start_plan_responses,
)
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.io import atomic_write_parquet
from retailsim_core.storage.mapped import MappedArrays
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import (
    CHECKPOINT_TABLE,
)
from retailsim_core.training.adapt.size_calibration import calibrate_size
from retailsim_core.training.checkpoints import checkpoint as ckpt
from retailsim_core.training.run import distributed
from retailsim_core.training.run.loop import train
from retailsim_core.training.run.model_setup import build_model, fit_feature_scaling
from retailsim_core.training.run.train_config import TrainConfig, phase_schedule
from retailsim_core.training.scoring.validation import popularity_scores


def start_responses(
    response: PriceResponse,
    warehouse: Warehouse,
    split: TemporalSplit,
    store: TripStore,
    vocab: ProductVocab,
    categories: np.ndarray,
    log: Callable[[str], None],
) -> None:
    """Start the own-depth responses, and the display and mailer responses where the training
    weeks have a promotion plan, at the training weeks' rate ratios (``response_prior``; D87,
    D88). The depth is the shelf's: a cut the region's other stores showed (D45). ``store``:
    the trip store; ``categories``: (V,) category code per token."""
    weeks = list(range(1, split.train_end + 1))
    # Lazy: the sales are aggregated from the store's own frame, never a filtered copy of it.
    trips = store.trips.lazy().filter(pl.col("week") <= split.train_end)
    products = vocab.frame()
    stores = trips.select("store_id", "store_region").unique("store_id").collect()
    cuts = regional_cuts(warehouse, weeks, stores).lazy()
    own = depth_responses(trips, cuts, products, categories)
    if own is not None:
        start_depth_responses(response, own)
        log(f"own-depth responses start at the training weeks' (median {np.median(own):.2f})")
    plan = promotion_plan(warehouse, weeks)
    lifts = None if plan is None else plan_lifts(trips, plan, products, categories)
    if lifts is not None:  # a source with a promotion plan
        start_plan_responses(response, lifts)
        log(f"plan responses start at the training weeks' lifts (median {np.median(lifts, 0)})")


def sample_customers(samples: pl.DataFrame, share: float, seed: int) -> pl.DataFrame:
    """The rows of a seeded ``share`` of the customers (all rows at share 1)."""
    if share >= 1.0:
        return samples
    customers = np.sort(samples["customer_id"].unique().to_numpy())
    n = max(1, round(share * len(customers)))
    kept = np.random.default_rng(seed).choice(customers, size=n, replace=False)
    return samples.filter(pl.col("customer_id").is_in(kept.tolist()))


@dataclass(frozen=True)
class TrainingSummary:
    """What a training run returns; the fields before ``history`` are config.json's summary."""

    parameters: int
    epochs: int
    best_epoch: int
    training_seconds: float
    train_samples: int
    valid_samples: int
    vocabulary: int  # products in the vocabulary
    best: dict[str, float]  # the kept epoch's validation figures
    history: list[dict]  # one row per epoch
    model: WorldModel | None = None  # the trained model, when asked for (``model_out``)


def train_world_model(
    warehouse: Warehouse,
    split: TemporalSplit,
    model_cfg: WorldModelConfig,
    train_cfg: TrainConfig,
    tensor_cfg: TensorConfig = TensorConfig(max_history_trips=50),
    log: Callable[[str], None] = lambda _: None,
    model_out: bool = False,
    folder: Path | None = None,
    customer_share: float = 1.0,
) -> TrainingSummary:
    """Train on training weeks, early-stop on validation weeks, write the checkpoint folder (rank 0
    only under torchrun; default the warehouse's ``trained_checkpoint``). ``model_out`` adds the
    trained model to the summary; ``customer_share`` < 1 trains on the training baskets of that
    share of the customers (a seeded draw; the held-out simulator of ``pricing_run``)."""
    start = time.perf_counter()
    torch.set_num_threads(max(torch.get_num_threads(), 1))
    # The shelf and both sets on disk, read a batch at a time (D97).
    inputs = load_model_inputs(warehouse, range(1, split.valid_end + 1), MappedArrays(), log)
    samples = inputs.samples  # truncated baskets too: their top 50 by price (D120)
    train_samples = sample_customers(
        samples.filter(pl.col("split") == "train"), customer_share, train_cfg.seed
    )
    train_data = inputs.training_set(train_samples, tensor_cfg)
    valid_data = inputs.training_set(samples.filter(pl.col("split") == "validation"), tensor_cfg)
    log(
        f"tensors: {len(train_data):,} training / {len(valid_data):,} validation samples "
        f"in {time.perf_counter() - start:.1f}s; vocabulary {inputs.vocab.n_products:,} products"
    )
    model = build_model(
        model_cfg,
        inputs.product_table,
        train_data.customer_numeric.shape[1],
        train_cfg.seed,
        inputs.substitutes,
        inputs.copurchase,
        torch.from_numpy(inputs.categories),
    )
    store, vocab, categories = inputs.store, inputs.vocab, inputs.categories
    buckets = train_samples["bucket"].to_numpy()
    basket_hash = train_samples["basket_id"].hash().sum()
    # The sets hold what training reads: the frames can go, before the priors' transients.
    del inputs, samples, train_samples
    start_responses(model.price_response, warehouse, split, store, vocab, categories, log)
    del store
    fit_feature_scaling(model, train_data, train_cfg.seed)
    popularity = popularity_scores(train_data, np.arange(len(train_data)))
    train_data.release()  # the pages the whole-set passes above read
    folder = folder or warehouse.table_dir(CHECKPOINT_TABLE)
    fingerprint = _run_fingerprint(
        model_cfg, train_cfg, tensor_cfg, vocab.n_products, basket_hash, len(valid_data)
    )
    result = train(
        model,
        train_data,
        buckets,
        valid_data,
        popularity,
        train_cfg,
        state_dir=folder / "training_state",
        log=log,
        fingerprint=fingerprint,
    )
    model.load_state_dict(result.best_weights)
    calibration = calibrate_size(model, valid_data, seed=train_cfg.seed)  # D131
    log(f"size head calibrated on validation baskets: {calibration}")
    summary = _summary(model, result.state, len(train_data), len(valid_data), vocab.n_products)
    if distributed.rank_and_world()[0] == 0:
        split_weeks = {"train_end": split.train_end, "valid_end": split.valid_end}
        write_checkpoint(
            folder,
            model,
            split_weeks,
            vocab,
            tensor_cfg,
            train_cfg,
            summary,
            result.state.history,
            calibration,
        )
        shutil.rmtree(
            folder / "training_state", ignore_errors=True
        )  # finished: the next run trains afresh
    return TrainingSummary(
        **summary, history=result.state.history, model=model if model_out else None
    )


def _run_fingerprint(model_cfg, train_cfg, tensor_cfg, n_products, basket_hash, n_valid) -> str:
    """What a resumed training must match: the configs, the vocabulary, the training baskets."""
    body = [
        model_cfg.to_dict(),
        train_cfg.to_dict(),
        tensor_cfg.__dict__,
        n_products,
        basket_hash,
        n_valid,
    ]
    return hashlib.sha256(json.dumps(body, default=str).encode()).hexdigest()


def _summary(model: WorldModel, state, n_train: int, n_valid: int, n_products: int) -> dict:
    """The checkpoint's training summary: sizes, epochs and the best epoch's figures."""
    best = next(h for h in state.history if h["epoch"] == state.best_epoch)
    return {
        "parameters": parameter_count(model),
        "epochs": state.epoch,
        "best_epoch": state.best_epoch,
        "training_seconds": round(state.seconds, 1),
        "train_samples": n_train,
        "valid_samples": n_valid,
        "vocabulary": n_products,
        "best": {k: v for k, v in best.items() if isinstance(v, float)},
    }


def write_checkpoint(
    folder: Path,
    model: WorldModel,
    split: dict,
    vocab: ProductVocab,
    tensor_cfg: TensorConfig,
    train_cfg: TrainConfig,
    summary: dict,
    history: list[dict],
    calibration: dict,
) -> None:
    ckpt.save_tensors(folder / "model.safetensors", model.state_dict())
    ckpt.write_json(
        folder / "config.json",
        {
            "model": model.cfg.to_dict(),
            "vocab_size": model.vocab_size,
            "n_customer_numeric": model.context.customer_numeric.in_features,
            "tensors": tensor_cfg.__dict__,
            "training": {"seed": train_cfg.seed, "phases": phase_schedule(train_cfg)},
            "split": split,
            "summary": summary,
            "history": history,
            "calibration": calibration,  # the size head's tilt (D131): ``load_model`` sets it
        },
    )
    atomic_write_parquet(vocab.frame(), folder / "vocabulary.parquet")
    ckpt.write_manifest(folder)
