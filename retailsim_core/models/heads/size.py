"""The basket-size head and its calibration (decision D131).

The head gives logits of a basket holding k = 1 .. max_items products from the context slot,
trained by cross-entropy on next-basket queries. Its mean can still miss the real mean size (on
the real LGSR sample by +10% on the training weeks themselves), and every expected-units figure
(``held`` = 1 - (1 - p)^size), simulated basket and demand forecast inherits the miss. After
training, the head is calibrated on validation baskets by exponential tilting,

    p'(k) ∝ p(k) · exp(tilt · k),

the distribution closest to the head's (least Kullback-Leibler divergence) whose mean over the
validation contexts is their real mean size, capped at max_items (the head cannot say more).
One scalar, fitted on held-out weeks; the tilt applies at inference only, so a fine-tune (a
refresh) learns the raw head, never around its own calibration.

Glossary: B contexts, K = max_items size classes, D d_model.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

TILT_BOUND = 3.0  # |tilt| searched: e^(3k) moves the mean to either end for any head


class SizeHead(nn.Linear):
    """(B, D) -> (B, K) size logits; ``tilt`` (a buffer set from the checkpoint's config, not a
    weight: old checkpoints load unchanged) added as tilt · k when not training."""

    def __init__(self, d_model: int, max_items: int):
        super().__init__(d_model, max_items)
        self.register_buffer("tilt", torch.zeros(()), persistent=False)
        steps = torch.arange(1, max_items + 1, dtype=torch.float32)
        self.register_buffer("steps", steps, persistent=False)  # (K,) the sizes k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = super().forward(x)  # (B, K)
        return logits if self.training else logits + self.tilt * self.steps


def tilted_mean(probs: np.ndarray, tilt: float) -> float:
    """Mean over contexts of E[k] under p(k) · exp(tilt · k) renormalised; ``probs`` (B, K)."""
    k = np.arange(1, probs.shape[1] + 1, dtype=np.float64)
    log_w = np.log(np.maximum(probs, 1e-300)) + tilt * k
    w = np.exp(log_w - log_w.max(1, keepdims=True))
    return float(((w * k).sum(1) / w.sum(1)).mean())


def fit_tilt(probs: np.ndarray, target: float, tol: float = 1e-6) -> float:
    """The tilt whose ``tilted_mean`` is ``target`` (bisection: the mean rises with the tilt),
    clipped to ±TILT_BOUND where the target is out of reach."""
    low, high = -TILT_BOUND, TILT_BOUND
    if tilted_mean(probs, low) >= target:
        return low
    if tilted_mean(probs, high) <= target:
        return high
    while high - low > tol:
        mid = 0.5 * (low + high)
        low, high = (mid, high) if tilted_mean(probs, mid) < target else (low, mid)
    return 0.5 * (low + high)
