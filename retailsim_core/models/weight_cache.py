"""Reuse of weight-only results at inference: the full-vocabulary projections (V x G -> V x D)
that every forward recomputes cost more than the rest of a one-context forward. While no
gradient is recorded and outside compilation/export tracing, a result is kept and reused until
one of the weights it was computed from changes (tensor version counters catch in-place
optimizer steps and ``load_state_dict``)."""

from __future__ import annotations

from collections.abc import Callable

import torch


class WeightCache:
    def __init__(self):
        self._store: dict[str, tuple[tuple, torch.Tensor]] = {}

    def get(
        self, name: str, weights: tuple[torch.Tensor, ...], compute: Callable[[], torch.Tensor]
    ) -> torch.Tensor:
        if torch.is_grad_enabled() or torch.compiler.is_compiling():
            return compute()
        key = tuple((id(w), w._version, w.device) for w in weights)
        hit = self._store.get(name)
        if hit is not None and hit[0] == key:
            return hit[1]
        value = compute()
        self._store[name] = (key, value)
        return value
