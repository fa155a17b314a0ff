"""What a ``TrainingSet`` of some weeks is built from, as one value: the pipeline loads it from
the warehouse once (``pipeline/world_model_training.load_model_inputs``) and passes it down to
training, evaluation and serving, which never read the warehouse themselves.

Glossary: V vocabulary, G GraphSAGE width, E graph edges.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl
import torch

from retailsim_core.calendar import LGSR, SourceCalendar
from retailsim_core.datasets.batch_inputs import TripIndex
from retailsim_core.datasets.shelf import ShelfPrices
from retailsim_core.datasets.tensors import TensorConfig, TrainingSet
from retailsim_core.datasets.tokens import ProductVocab
from retailsim_core.datasets.trips import TripStore
from retailsim_core.storage.mapped import MappedArrays


@dataclass
class ModelInputs:
    """Everything a TrainingSet needs, loaded once from the warehouse."""

    vocab: ProductVocab
    id_map: pl.DataFrame  # the GraphSAGE id map: product_id, prod_code_10, ... by embedding row
    product_table: torch.Tensor  # (V, G) GraphSAGE rows in token order
    store: TripStore
    samples: pl.DataFrame
    # customer_store_affinity, mission_patterns of the weeks and the T4 rows of the samples' own
    # (product, store, week) cells: frames, or scans where the inputs are ``mapped`` (a
    # training set's build chunk reads the rows its samples join to)
    affinity: pl.DataFrame | pl.LazyFrame
    missions: pl.DataFrame | pl.LazyFrame
    price_features: pl.DataFrame | pl.LazyFrame
    store_features: pl.DataFrame  # store_features of the weeks
    shelf: ShelfPrices
    edges: pl.DataFrame  # the product graph's edges
    substitutes: torch.Tensor  # (2, E) substitution edges of the product graph, as tokens
    copurchase: tuple[torch.Tensor, torch.Tensor]  # (2, E) co-purchase edges as tokens, (E,) lifts
    calendar: SourceCalendar = LGSR  # the source's weeks and holidays (calendar inputs)
    mapped: MappedArrays | None = None  # where training sets keep their arrays (None: memory)

    def training_set(
        self, samples: pl.DataFrame, cfg: TensorConfig = TensorConfig()
    ) -> TrainingSet:
        return TrainingSet(
            samples,
            self.store,
            self.vocab,
            self.affinity,
            self.missions,
            self.price_features,
            self.store_features,
            cfg,
            self.shelf,
            self.calendar,
            self.mapped,
            self.trip_index,
        )

    @cached_property
    def trip_index(self) -> TripIndex:
        """The trip store's arrays, built once for every set of these inputs."""
        return TripIndex.build(self.store.trips, self.vocab, self.mapped)

    @property
    def categories(self) -> np.ndarray:
        """(V,) category code of every token (``product_categories``)."""
        return product_categories(self.id_map, self.vocab)


def product_categories(id_map: pl.DataFrame, vocab: ProductVocab) -> np.ndarray:
    """(V,) category code (1-based, from PROD_CODE_10) of every token; 0 for special tokens."""
    codes = vocab.frame().join(
        id_map.select("product_id", "prod_code_10"), on="product_id", how="left"
    )
    out = np.zeros(vocab.size, dtype=np.int64)
    out[codes["token"].to_numpy()] = (
        codes["prod_code_10"].cast(pl.Categorical).to_physical().to_numpy() + 1
    )
    return out
