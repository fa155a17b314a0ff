"""Losses of the world model (spec §5.5.2): focal loss on masked positions, InfoNCE over
in-basket pairs, cross-entropy auxiliary heads, and their phase-dependent weighted sum.

Glossary: B batch, L basket length, M masked positions in the batch, C candidate products.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from retailsim_core.models.world_model import AUX_HEADS, ModelOutput, WorldModel
from retailsim_core.tokens import PAD


@dataclass(frozen=True)
class LossWeights:
    focal: float = 0.6          # w1 (spec §5.6.1 phase 2)
    contrastive: float = 0.2    # w2
    basket_size: float = 0.08   # w3
    price_sensitivity: float = 0.08  # w4
    mission: float = 0.04       # w5, split evenly between mission type and mission focus

    @classmethod
    def focal_only(cls) -> LossWeights:
        return cls(focal=1.0, contrastive=0.0, basket_size=0.0, price_sensitivity=0.0, mission=0.0)

    def of_head(self, name: str) -> float:
        return {"basket_size": self.basket_size, "price_sensitivity": self.price_sensitivity,
                "mission_type": self.mission / 2, "mission_focus": self.mission / 2}[name]


def focal_loss(logits: torch.Tensor, target: torch.Tensor, gamma: float = 2.0) -> torch.Tensor:
    """FL = -(1 - p_t)^gamma log p_t per row. logits (M, C), target (M,) indices -> (M,)."""
    logp = F.log_softmax(logits, dim=-1).gather(1, target[:, None])[:, 0]
    return -((1 - logp.exp()) ** gamma) * logp


def sampled_candidates(targets: torch.Tensor, n_products: int, eos: int, n_negatives: int,
                       generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Candidate set = the batch's target tokens + [EOS] + ``n_negatives`` uniform products, unique
    (so an accidental hit is simply the positive). Returns (C,) candidates and (M,) target columns.
    With ``n_negatives >= n_products`` the candidates are the whole product vocabulary."""
    if n_negatives >= n_products:
        negatives = torch.arange(1, n_products + 1)
    else:
        negatives = torch.randint(1, n_products + 1, (n_negatives,), generator=generator)
    pool = torch.cat([targets, torch.tensor([eos], device=targets.device), negatives.to(targets.device)])
    candidates, inverse = torch.unique(pool, return_inverse=True)
    return candidates, inverse[: len(targets)]


def info_nce(model_hidden: torch.Tensor, projection: nn.Module, tokens: torch.Tensor, visible: torch.Tensor,
             generator: torch.Generator, temperature: float = 0.07) -> torch.Tensor:
    """InfoNCE over in-basket pairs: two random visible products of each basket are a positive pair,
    the other baskets' picks are negatives (symmetric). hidden (B, L + 1, D); visible (B, L)."""
    scores = torch.rand(visible.shape, generator=generator).to(visible.device).masked_fill(~visible, -1.0)
    top = scores.topk(2, dim=1)
    ok = (top.values > -1.0).all(1)                                                 # baskets with >= 2 products
    if ok.sum() < 2:
        return model_hidden.sum() * 0.0
    rows = torch.nonzero(ok)[:, 0]
    z = F.normalize(projection(model_hidden[rows[:, None], top.indices[rows] + 1]), dim=-1)   # (n, 2, D)
    logits = z[:, 0] @ z[:, 1].T / temperature                                       # (n, n)
    labels = torch.arange(len(rows), device=logits.device)
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2


@dataclass
class LossParts:
    total: torch.Tensor
    parts: dict[str, float]


def world_model_loss(model: WorldModel, out: ModelOutput, batch: dict[str, torch.Tensor], inputs: torch.Tensor,
                     targets: torch.Tensor, hide_t6: torch.Tensor, weights: LossWeights, generator: torch.Generator,
                     contrastive_head: nn.Module, gamma: float = 2.0, temperature: float = 0.07,
                     basket_targets: tuple[torch.Tensor, torch.Tensor] | None = None) -> LossParts:
    """``targets`` (B, L): the true token at predicted positions, [PAD] elsewhere (so [PAD]
    positions never carry loss). ``basket_targets`` (rows, tokens): next-basket queries, every
    product of the basket a target of the single [MASK] at position 0. The focal loss is
    normalised by the number of (position, target) pairs."""
    rows, cols = torch.nonzero(targets != PAD, as_tuple=True)
    true = targets[rows, cols].long()
    if basket_targets is not None:
        rows = torch.cat([rows, basket_targets[0]])
        cols = torch.cat([cols, torch.zeros_like(basket_targets[0])])
        true = torch.cat([true, basket_targets[1].long()])
    n_products, eos = model.vocab_size - 3, model.vocab_size - 1
    if model.training and model.cfg.n_negatives < n_products:
        candidates, target_col = sampled_candidates(true, n_products, eos, model.cfg.n_negatives, generator)
        logits = model.product_logits(out, rows, cols, candidates)
    else:
        logits, target_col = model.product_logits(out, rows, cols), true
    # Products visible elsewhere in the input basket cannot be the answer (baskets list distinct products).
    shown = shown_products(inputs, targets, model.vocab_size)[rows]              # (M, V) bool (queries: none)
    if logits.shape[1] != model.vocab_size:
        shown = shown[:, candidates]
    logits = logits.masked_fill(shown & ~F.one_hot(target_col, logits.shape[1]).bool(), -torch.inf)
    focal = focal_loss(logits, target_col, gamma).sum() / max(len(rows), 1)
    total, parts = weights.focal * focal, {"focal": focal.item()}
    if weights.contrastive > 0:
        visible = (inputs != PAD) & (targets == PAD) & (inputs < n_products + 1) & (inputs >= 1)
        nce = info_nce(out.hidden, contrastive_head, inputs, visible, generator, temperature)
        total, parts["contrastive"] = total + weights.contrastive * nce, nce.item()
    for name, (col, n_classes) in AUX_HEADS.items():
        w = weights.of_head(name)
        if w <= 0:
            continue
        # Only rows whose T6 was withheld: the head never sees the value it predicts.
        label = batch["t6"][:, col] - 1
        label = label.masked_fill(~hide_t6 | (label >= n_classes), -1)
        if (label >= 0).any():
            ce = F.cross_entropy(out.aux_logits[name], label, ignore_index=-1)
            total, parts[name] = total + w * ce, ce.item()
    parts["total"] = total.item()
    return LossParts(total=total, parts=parts)


def shown_products(inputs: torch.Tensor, targets: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """(B, V) True where a product token is shown unmasked in the basket input (positions without
    a target); specials never count."""
    n_products = vocab_size - 3
    visible = (targets == PAD) & (inputs >= 1) & (inputs <= n_products)
    shown = torch.zeros(inputs.shape[0], vocab_size, dtype=torch.bool, device=inputs.device)
    shown.scatter_(1, torch.where(visible, inputs, torch.zeros_like(inputs)).long(), True)
    shown[:, PAD] = False
    return shown
