"""A world model ready to train: built under a seed, its repeat features standardised."""

from __future__ import annotations

import numpy as np
import torch

from retailsim_core.datasets.tensors import TrainingSet
from retailsim_core.models.world_model import WorldModel, WorldModelConfig


def fit_feature_scaling(model: WorldModel, data: TrainingSet, seed: int, n: int = 1_000) -> None:
    """Standardise the repeat head's history features with a seeded sample of training baskets."""
    rows = np.sort(
        np.random.default_rng([seed, 5]).choice(len(data), min(n, len(data)), replace=False)
    )
    batch = data[rows]
    products = batch["repeat_products"]
    raw = model.repeat_head.raw_features(
        batch["repeat_values"],
        products,
        torch.zeros_like(batch["basket_labels"]),
        model.price_response.substitute_edges,
        model.vocab_size,
    )
    model.repeat_head.fit_scaling(raw, products)


def build_model(
    cfg: WorldModelConfig,
    product_table: torch.Tensor,
    n_customer_numeric: int,
    seed: int,
    substitutes: torch.Tensor | None = None,
    copurchase: tuple[torch.Tensor, torch.Tensor] | None = None,
    categories: torch.Tensor | None = None,
) -> WorldModel:
    torch.manual_seed(seed)
    return WorldModel(cfg, product_table, n_customer_numeric, substitutes, copurchase, categories)
