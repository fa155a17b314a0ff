"""An exponential moving average of the model's parameters, the weights validation judges and the
checkpoint keeps (decision D70).

With a few hundred optimizer steps per run and validation on a few thousand baskets, the raw
weights of consecutive epochs differ by SGD noise as large as the gains early stopping chases;
the average over the last steps is a smoother, better point. After t steps since the last
reset (every phase start) the decay is ``min(decay, (1 + t) / (10 + t))``: the horizon grows
with the phase (about 12 steps after 100, 30 after 300, up to ``1 / (1 - decay)``), so heads
whose losses start with a phase (basket size, auxiliary) are not averaged with their untrained
weights, and short runs (tests) are not dominated by the initial weights.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn as nn


class WeightAverage:
    def __init__(self, model: nn.Module, decay: float):
        self.model, self.decay, self.steps = model, decay, 0
        self.average = {n: p.detach().clone() for n, p in model.named_parameters()}

    def reset(self) -> None:
        """Start again from the model's current weights (a new phase starts from the best)."""
        self.steps = 0
        for n, p in self.model.named_parameters():
            self.average[n].copy_(p.detach())

    @torch.no_grad()
    def update(self) -> None:
        """Fold the weights after an optimizer step into the average."""
        self.steps += 1
        decay = min(self.decay, (1 + self.steps) / (10 + self.steps))
        for n, p in self.model.named_parameters():
            self.average[n].lerp_(p.detach(), 1.0 - decay)

    @contextmanager
    def applied(self) -> Iterator[None]:
        """The model holds the averaged weights inside the block, its own weights after it."""
        own = {n: p.detach().clone() for n, p in self.model.named_parameters()}
        self._copy_into_model(self.average)
        try:
            yield
        finally:
            self._copy_into_model(own)

    @torch.no_grad()
    def _copy_into_model(self, tensors: dict[str, torch.Tensor]) -> None:
        for n, p in self.model.named_parameters():
            p.copy_(tensors[n])

    def tensors(self) -> dict[str, torch.Tensor]:
        return dict(self.average)

    @torch.no_grad()
    def load(self, tensors: dict[str, torch.Tensor], steps: int) -> None:
        self.steps = steps
        for n, value in tensors.items():
            self.average[n].copy_(value)
