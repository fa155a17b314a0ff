"""Ceilings on synthetic data, from the generator's exact purchase probabilities (``synth.oracle``).

- ``oracle``: given each test basket's planted context (customer, store, mission focus, price
  mode, size) from the ground truth — it knows the basket's mission, so it is the ceiling of
  the conditional (given-mission) rows.
- ``oracle (no mission)``: the same probabilities averaged over the missions the shopper might
  be on, given only what is known before the trip (the planted customer, the store and the
  hour): P(type | customer, hour) from the customer's type mix and the hour profile of each
  type, the size given the type, the customer's focus mix and price modes. The Bayes-optimal
  ranking for an honest method: the ceiling of the headline rows.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import torch

from retailsim_core.datasets.batch import Batch
from retailsim_core.datasets.tokens import PAD, ProductVocab
from retailsim_core.ingest.lgsr import MISSION_FOCI
from retailsim_core.synth.baskets import HOUR_PROBS, HOURS
from retailsim_core.synth.config import BASKET_SIZES, PRICE_MODES
from retailsim_core.synth.oracle import WeekDemand, purchase_probabilities, week_demand
from retailsim_core.synth.world import PlantedTruth


def _tokens_of(world, vocab: ProductVocab) -> np.ndarray:
    lookup = dict(zip(vocab.products, range(1, vocab.n_products + 1), strict=True))
    return np.array(
        [lookup.get(code, PAD) for code in world.catalogue.product_code]
    )  # catalogue -> token


def _scorer(truth: PlantedTruth, samples: pl.DataFrame, vocab: ProductVocab, probabilities):
    """(rows, batch) -> (S, V) scores from ``probabilities(world, week, group, demand) -> (n, P)``
    applied to each week's planted contexts (a handful of weeks per chunk, vectorised within);
    each week's shared demand is built once for all chunks."""
    world = truth.world
    ctx = truth.context(samples)
    token_of = _tokens_of(world, vocab)
    known = token_of > 0
    demand: dict[int, WeekDemand] = {}

    def score(rows: np.ndarray, batch: Batch) -> torch.Tensor:
        out = np.full((len(rows), vocab.size), -np.inf)
        part = ctx[rows].with_row_index("i").with_columns(row=pl.Series(rows))
        for (week,), group in part.group_by("week"):
            week = int(week)
            if week not in demand:
                demand[week] = week_demand(world, week)
            out[np.ix_(group["i"].to_numpy(), token_of[known])] = probabilities(
                world, week, group, demand[week]
            )[:, known]
        return torch.as_tensor(out)

    return score


def oracle_scorer(truth: PlantedTruth, samples: pl.DataFrame, vocab: ProductVocab):
    return _scorer(
        truth,
        samples,
        vocab,
        lambda world, week, g, demand: purchase_probabilities(
            world,
            week,
            g["customer_idx"].to_numpy(),
            g["store_idx"].to_numpy(),
            g["mission_focus"].to_list(),
            g["price_mode"].to_list(),
            g["basket_size"].to_list(),
            demand,
        ),
    )


def mission_posterior(world, customer: np.ndarray, hour: np.ndarray) -> dict[str, np.ndarray]:
    """What is known of a basket's mission before the trip: (B, 4) focus, (B, 3) price mode and
    (B, 3) size probabilities given the customer and the hour."""
    pop, beh = world.population, world.cfg.behaviour
    hour_col = np.clip(np.searchsorted(HOURS, hour), 0, len(HOURS) - 1)
    types = pop.type_mix[customer] * HOUR_PROBS[:, hour_col].T  # (B, 3)
    types /= types.sum(1, keepdims=True)
    size = types @ np.asarray(beh.size_given_type)  # (B, 3)
    own = pop.price_segment[customer]
    mode = np.full((len(customer), len(PRICE_MODES)), 1.0 / len(PRICE_MODES))
    has_own = own < len(PRICE_MODES)
    mode[has_own] *= 1 - beh.own_price_mode_prob
    mode[has_own, own[has_own]] += beh.own_price_mode_prob
    return {"focus": pop.focus_mix[customer], "mode": mode, "size": size}


def honest_oracle_scorer(
    truth: PlantedTruth, samples: pl.DataFrame, vocab: ProductVocab, hours: np.ndarray
):
    """``oracle (no mission)``; ``hours`` (len(samples),) the shop hour of each sample."""

    def probabilities(world, week: int, group: pl.DataFrame, demand: WeekDemand) -> np.ndarray:
        customer, store = group["customer_idx"].to_numpy(), group["store_idx"].to_numpy()
        post = mission_posterior(world, customer, hours[group["row"].to_numpy()])
        total = np.zeros((group.height, len(world.catalogue.product_code)))
        for f in range(len(MISSION_FOCI)):
            for m in range(len(PRICE_MODES)):
                for z in range(len(BASKET_SIZES)):
                    w = post["focus"][:, f] * post["mode"][:, m] * post["size"][:, z]
                    total += w[:, None] * purchase_probabilities(
                        world, week, customer, store, f, m, z, demand
                    )
        return total

    return _scorer(truth, samples, vocab, probabilities)
