"""The tasks stage: the baskets every method is scored on, and what the metrics need.

Loads the checkpoint and the validation and test weeks from the warehouse once: the samples and
their tensors, the customers' trips as a (trips, V) matrix, product popularity as of each
period's start, categories and prices. Validation baskets tune the baselines; test baskets are
scored once. Subsamples are seeded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import scipy.sparse as sp
import torch

from retailsim_core.evaluation import baselines as bl
from retailsim_core.evaluation.eval_config import EvalConfig
from retailsim_core.evaluation.metrics import next_basket_metrics, truth_matrix
from retailsim_core.models.world_model import WorldModel
from retailsim_core.pipeline.embeddings import product_categories
from retailsim_core.pipeline.feature_weeks import PRICE_FEATURES_TABLE
from retailsim_core.pipeline.training_data_weeks import SAMPLES_TABLE
from retailsim_core.pipeline.world_model_training import (
    CHECKPOINT_TABLE,
    load_model,
    load_model_inputs,
)
from retailsim_core.split import TemporalSplit
from retailsim_core.tensors import TensorConfig, TrainingSet
from retailsim_core.warehouse import Warehouse


@dataclass(frozen=True)
class EvalTasks:
    """Glossary: S samples (validation and test baskets), T trips, V vocabulary."""

    model: WorldModel | None  # None when only the baselines are fitted
    config: dict  # the checkpoint's config.json ({} without a model)
    samples: pl.DataFrame  # (S,) validation and test baskets
    data: TrainingSet  # their tensors
    valid_rows: np.ndarray  # rows of ``samples`` that tune the baselines
    test_rows: np.ndarray  # rows every method is scored on: the test sample
    cold_start_rows: np.ndarray  # cold-start test rows outside the sample, for that slice only
    trips: sp.csr_matrix  # (T, V) product counts of every customer trip
    valid_day: int  # first shop day of the validation weeks
    test_day: int  # first shop day of the test weeks
    popularity: dict[str, np.ndarray]  # "valid" | "test" -> (V,) counts before the period
    categories: np.ndarray  # (V,) category of each token
    context: dict  # what the metrics read besides scores (``basket_context``)

    @property
    def customers(self) -> np.ndarray:
        """(S,) a customer code per sample (the bootstrap's clusters)."""
        return self.samples["customer_id"].cast(pl.Categorical).to_physical().to_numpy()

    def validation_recall(self, scores, rows: np.ndarray) -> float:
        """Mean R@20 of ``scores`` on validation ``rows``: what every baseline is tuned on."""
        data = self.data
        truth = truth_matrix(
            data.item_tokens, data.item_starts[rows], data.item_counts[rows], data.vocab.size
        )
        m = next_basket_metrics(
            torch.as_tensor(scores),
            truth,
            repeat=self.context["repeat_of"](rows),
            basket_len=self.context["basket_len"][rows],
            categories=self.categories,
            outside=data.item_oov[rows],
        )
        return float(m["R@20"].mean())


def load_tasks(
    warehouse: Warehouse,
    split: TemporalSplit,
    cfg: EvalConfig,
    checkpoint: Path | None = None,
    *,
    with_model: bool = True,
) -> EvalTasks:
    """``with_model=False``: the baselines' view (no checkpoint read; the tensors' defaults, which
    no baseline depends on: they read whole histories and whole baskets)."""
    model, config = None, {}
    if with_model:
        model, vocab, config = load_model(checkpoint or warehouse.table_dir(CHECKPOINT_TABLE))
    # Validation and test weeks only: their rows are all it scores, and the price and shelf
    # tables of the training weeks were most of its memory on real data (20 GB at 3M rows).
    inputs = load_model_inputs(
        warehouse, [w for w in warehouse.weeks(SAMPLES_TABLE) if w > split.train_end]
    )
    if with_model and inputs.vocab != vocab:
        raise ValueError(
            "the checkpoint's vocabulary differs from the warehouse's GraphSAGE products: retrain"
        )
    vocab = inputs.vocab
    samples = inputs.samples.filter(pl.col("split") != "train")
    data = inputs.training_set(samples, TensorConfig(**config.get("tensors", {})))
    split_col = samples["split"].to_numpy()
    valid_rows = subsample(
        np.flatnonzero(split_col == "validation"), cfg.max_valid_samples, cfg.seed
    )
    test_rows = subsample(np.flatnonzero(split_col == "test"), cfg.max_test_samples, cfg.seed + 1)
    cold = np.flatnonzero((split_col == "test") & samples["is_cold_start"].to_numpy())
    cold_start_rows = np.setdiff1d(cold, test_rows) if cfg.every_cold_start else cold[:0]
    trips = bl.trip_matrix(data)
    valid_day = first_day_of_week(inputs.store.trips, split.train_end + 1)
    test_day = first_day_of_week(inputs.store.trips, split.valid_end + 1)
    categories = product_categories(warehouse, vocab)
    return EvalTasks(
        model=model,
        config=config,
        samples=samples,
        data=data,
        valid_rows=valid_rows,
        test_rows=test_rows,
        cold_start_rows=cold_start_rows,
        trips=trips,
        valid_day=valid_day,
        test_day=test_day,
        popularity={
            "valid": _popularity(data, trips, valid_day),
            "test": _popularity(data, trips, test_day),
        },
        categories=categories,
        context=basket_context(
            data, samples, inputs.store, trips, categories, _mean_prices(warehouse, vocab)
        ),
    )


def subsample(rows: np.ndarray, n: int | None, seed: int) -> np.ndarray:
    if n is None or len(rows) <= n:
        return rows
    return np.sort(np.random.default_rng(seed).choice(rows, n, replace=False))


def basket_context(
    data: TrainingSet, samples: pl.DataFrame, store, trips, categories, prices
) -> dict:
    """What the metrics need besides scores: products bought before, the predicted basket size of
    a sample (the customer's mean trip size; the median trip for new customers), prices, spend."""
    sizes = np.diff(data.trip_offsets).astype(np.float64)
    rows = np.arange(len(samples))
    w = bl.history_weights(*bl.sample_history(data, rows))
    n = np.asarray(w.sum(1)).ravel()
    mean_size = np.rint((w @ sizes) / np.maximum(n, 1))
    basket_len = np.where(n > 0, mean_size, np.median(sizes)).astype(np.int64)
    spend = (
        samples.join(
            store.trips.select("basket_id", "spend"),
            on="basket_id",
            how="left",
            maintain_order="left",
        )["spend"]
        .fill_null(0.0)
        .to_numpy()
    )
    return {
        "repeat_of": lambda r: (bl.personal_counts(data, r, trips) > 0).astype(np.float32),
        "basket_len": basket_len,
        "categories": categories,
        "spend": spend,
        "prices_of": lambda r: np.broadcast_to(prices, (len(r), len(prices))),
    }


def _popularity(data: TrainingSet, trips, before_day: int) -> np.ndarray:
    return np.asarray(trips[data.trip_day < before_day].sum(0)).ravel()


def first_day_of_week(trips: pl.DataFrame, week: int) -> int:
    """The day of the first trip of week ``week`` or later (days since 1970-01-01; a large
    sentinel when there is none): where a pool of trips "before the week" ends."""
    later = trips.filter(pl.col("week") >= week)
    return int(later["shop_date"].cast(pl.Int32).min()) if later.height else 10**9


def _mean_prices(warehouse: Warehouse, vocab) -> np.ndarray:
    """Mean week price of each token over every price-features row (for the revenue of a
    predicted basket)."""
    prices = (
        warehouse.scan(PRICE_FEATURES_TABLE)
        .group_by("product_id")
        .agg(pl.col("actual_price").mean())
        .collect()
    )
    tokens = vocab.frame().join(prices, on="product_id", how="left")
    out = np.zeros(vocab.size)
    out[tokens["token"].to_numpy()] = tokens["actual_price"].fill_null(0.0).to_numpy()
    return out
