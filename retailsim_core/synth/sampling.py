"""Vectorised categorical sampling used throughout the generator."""

from __future__ import annotations

import numpy as np


def categorical(rng: np.random.Generator, probs: np.ndarray) -> np.ndarray:
    """One draw per row of a (N, K) probability matrix."""
    cum = np.cumsum(probs, axis=1)
    u = rng.random(len(probs))[:, None] * cum[:, -1:]
    return np.minimum((cum <= u).sum(axis=1), probs.shape[1] - 1)


def rowwise_choice(rng: np.random.Generator, weights: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each entry of ``rows``, a column of ``weights[row]`` drawn proportionally.

    Batched inverse CDF: each row's normalised CDF is offset by its row index, so one
    ``searchsorted`` over the flattened matrix serves every draw. Zero columns are never drawn.
    """
    cum = np.cumsum(weights, axis=1)
    cum = cum / np.where(cum[:, -1:] > 0, cum[:, -1:], 1.0)
    flat = (cum + np.arange(len(cum))[:, None]).ravel()
    idx = (
        np.searchsorted(flat, rows + rng.random(len(rows)), side="right") - rows * weights.shape[1]
    )
    return np.clip(idx, 0, weights.shape[1] - 1)
