"""The optimizer's parameter groups: the price responses apart (no decay, their own LR multiples,
D45, D87, D88, D91), and the step that gives a group's columns their own share of it."""

from __future__ import annotations

import torch
import torch.nn as nn

from retailsim_core.models.heads.products import DEPTH_RESPONSES, PRODUCT_RESPONSES
from retailsim_core.training.run.train_config import TrainConfig


def adamw(params, **kwargs) -> torch.optim.AdamW:
    """AdamW on its fused kernel, one pass over every parameter instead of a Python loop of
    per-tensor ops (the world model's ~150 tensors: 0.8 ms a step against 4.0 on 2 cores; D137).
    Same update rule; the rounding of a few ops differs from the loop's."""
    return torch.optim.AdamW(params, fused=True, **kwargs)


def param_groups(step: nn.Module, model, cfg: TrainConfig) -> list[dict]:
    """Everything at the phase LR with weight decay, except the price responses of categories
    and products, without decay (decay would pull rarely promoted products' elasticities to 0;
    pooling comes from the shared category term, D87): the plan responses (display, mailer) at
    ``price_lr_scale`` times the LR, the depth responses (own, substitutes') at
    ``depth_lr_scale`` times it (D91). The products' four responses are one (V, 4) parameter,
    so its depth columns take their share of the step after it (``column_lr``): Adam's update
    of an entry is lr x m / (sqrt(v) + eps), and scaling it is that entry's LR."""
    response = model.price_response
    price = [response.raw_category_weights, response.raw_product_weights]
    others = [p for p in step.parameters() if all(p is not q for q in price)]
    depth = cfg.depth_lr_scale / cfg.price_lr_scale
    columns = [depth if r in DEPTH_RESPONSES else 1.0 for r in PRODUCT_RESPONSES]  # JSON-safe
    plan = {"weight_decay": 0.0, "lr_scale": cfg.price_lr_scale}
    return [
        {"params": others},
        {"params": [response.raw_category_weights], **plan},
        {"params": [response.raw_product_weights], **plan, "column_lr": columns},
    ]


def _column_scaled(optimizer: torch.optim.Optimizer) -> list[tuple[dict, torch.Tensor]]:
    """(group, parameter) of every group with a per-column LR (``column_lr``, C floats)."""
    return [(g, p) for g in optimizer.param_groups if "column_lr" in g for p in g["params"]]


def step_with_column_lr(optimizer: torch.optim.Optimizer) -> None:
    """``optimizer.step()``; the parameters of a group with a ``column_lr`` (C floats) then move by
    that share of their update along their last dimension."""
    before = [(p, p.detach().clone(), g["column_lr"]) for g, p in _column_scaled(optimizer)]
    optimizer.step()
    for p, old, scale in before:
        p.data.copy_(torch.lerp(old, p.data, torch.tensor(scale, dtype=p.dtype)))
