"""The world model as a scorer: next-basket log-probabilities over the whole vocabulary, the
function the service answers with and the evaluation scores (one place for both).

A scorer maps (rows, batch) to an (S, V) score matrix; a masked scorer also reads the basket's
shown products and returns one row per masked position.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from retailsim_core.datasets.batch import Batch
from retailsim_core.datasets.tokens import PAD
from retailsim_core.models.losses import shown_products
from retailsim_core.models.world_model import WorldModel

Scorer = Callable[[np.ndarray, dict], torch.Tensor]  # (rows, batch) -> (S, V)
MaskedScorer = Callable[[np.ndarray, dict, np.ndarray, np.ndarray], torch.Tensor]  # -> (M, V)


def world_model_scorer(model: WorldModel, given_mission: bool = False) -> Scorer:
    """Next-basket log-probabilities of the single-[MASK] query; ``given_mission``: the model is
    told the basket's true mission type and focus (the conditional row)."""

    @torch.no_grad()
    def score(rows: np.ndarray, batch: Batch) -> torch.Tensor:
        given = torch.full((len(rows),), given_mission, dtype=torch.bool)
        _, log_p = model.next_basket(batch, given_mission=given)
        return log_p.double().masked_fill(model.excluded(len(rows)), -torch.inf)

    return score


@torch.no_grad()
def world_model_masked_scorer(model: WorldModel) -> MaskedScorer:
    """Full-vocabulary scores at every masked position (no mission given)."""

    def score(rows, batch, m_in, m_tg) -> torch.Tensor:
        inputs, targets = torch.from_numpy(m_in), torch.from_numpy(m_tg)
        with torch.no_grad():
            out = model(batch, inputs, hidden=targets != PAD)
            r, c = torch.nonzero(targets != PAD, as_tuple=True)
            return model.slot_log_probs(
                out, r, c, shown_products(inputs, targets, model.vocab_size)[r]
            ).double()

    return score


def weekly_scorer(models: dict[int, WorldModel], weeks: np.ndarray, data) -> Scorer:
    """Each basket scored by the model made for its week (``models``: week -> model, e.g. the
    refresh of the week before; ``weeks``: (S,) the week of every sample row; ``data``: the
    ``TrainingSet`` the rows index, whose batches are rebuilt a week at a time)."""

    @torch.no_grad()
    def score(rows: np.ndarray, batch: Batch) -> torch.Tensor:
        week = weeks[rows]
        out = None
        for w in np.unique(week):
            at = np.flatnonzero(week == w)
            part = world_model_scorer(models[int(w)])(rows[at], data[rows[at]])
            if out is None:
                out = torch.empty((len(rows), part.shape[1]), dtype=part.dtype)
            out[torch.from_numpy(at)] = part
        return out

    return score
