"""The tasks stage: the baskets every method is scored on, and what the metrics need.

Loads the checkpoint and the validation and test weeks from the warehouse once: the samples and
their tensors, the customers' trips as a (trips, V) matrix, product popularity as of each
period's start, categories and prices. Validation baskets tune the baselines; test baskets are
scored once. Subsamples are seeded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import scipy.sparse as sp
import torch

from retailsim_core.baselines import counting as bl
from retailsim_core.datasets.model_inputs import ModelInputs
from retailsim_core.datasets.tensors import TensorConfig, TrainingSet
from retailsim_core.models.world_model import WorldModel
from retailsim_core.next_basket.eval_config import EvalConfig
from retailsim_core.split import TemporalSplit
from retailsim_core.training.scoring.metrics import ranked_hits, recall_at, truth_matrix


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
    # week -> the refreshed model that scores that week's baskets (``model_refresh``), or None
    refreshed: dict[int, WorldModel] | None = None

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
        _, hits, n_true = ranked_hits(torch.as_tensor(scores), truth, data.item_oov[rows])
        return float(recall_at(hits, n_true, 20).mean())  # next_basket_metrics' R@20


def build_tasks(
    inputs: ModelInputs,
    split: TemporalSplit,
    cfg: EvalConfig,
    mean_prices: np.ndarray,
    model: WorldModel | None = None,
    config: dict | None = None,
    refreshed: dict[int, WorldModel] | None = None,
) -> EvalTasks:
    """The tasks of the validation and test weeks' ``inputs`` (loaded by the pipeline);
    ``mean_prices``: (V,) mean week price of each token (the revenue of a predicted basket).
    Without ``model``: the baselines' view (the tensors' defaults, which no baseline depends on:
    they read whole histories and whole baskets)."""
    config = config or {}
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
    categories = inputs.categories
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
        context=basket_context(data, samples, inputs.store, trips, categories, mean_prices),
        refreshed=refreshed,
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
