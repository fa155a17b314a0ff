"""Calibrate a trained model's size head on validation baskets (``models/heads/size.py``, D131):
the tilt that makes the head's expected size over validation next-basket contexts (nothing of
the basket shown) their real mean size, every product counted and capped at max_items."""

from __future__ import annotations

import numpy as np
import torch

from retailsim_core.datasets.tensors import TrainingSet
from retailsim_core.models.heads.size import fit_tilt, tilted_mean
from retailsim_core.models.world_model import WorldModel

MAX_CONTEXTS = 4096  # validation baskets the tilt is fitted on (a seeded draw beyond)


@torch.no_grad()
def calibrate_size(model: WorldModel, data: TrainingSet, *, seed: int, chunk: int = 256) -> dict:
    """Set ``model``'s size tilt from the baskets of ``data`` (validation weeks) and return it
    with the figures it was fitted on (the checkpoint's ``calibration``)."""
    n = len(data)
    rows = np.arange(n)
    if n > MAX_CONTEXTS:
        rows = np.sort(np.random.default_rng(seed).choice(n, MAX_CONTEXTS, replace=False))
    head = model.size_head
    head.tilt.zero_()
    model.train(False)
    probs = np.concatenate([
        torch.softmax(model.next_basket(data[rows[lo : lo + chunk]])[0].size_logits.double(), -1)
        .numpy()
        for lo in range(0, len(rows), chunk)
    ])  # fmt: skip  # (B, K) the raw head's size distributions
    real = np.minimum(data.item_counts[rows] + data.item_oov[rows], head.out_features)
    target = float(real.mean())
    tilt = fit_tilt(probs, target)
    head.tilt.fill_(tilt)
    return {
        "size_tilt": tilt,
        "contexts": len(rows),
        "real_mean_size": target,  # capped at max_items: the most the head can say
        "head_mean_size": tilted_mean(probs, 0.0),
        "calibrated_mean_size": tilted_mean(probs, tilt),
    }
