"""Losses of the world model (design §5.5.2): focal loss on the product slots, InfoNCE over
in-basket pairs, cross-entropy auxiliary heads and basket length, and their weighted sum.

The product loss is the (focal) negative log-likelihood of each target under the slot's
repeat/explore mixture over the whole vocabulary (no sampled negatives). A next-basket query
slot has every product of the basket as a target (a set likelihood). Every basket row weighs
the same: its targets share a weight of one, so a 40-item basket does not count 40 times a
2-item one (R@20 and NDCG@10 average over baskets too).

Glossary: B batch, L basket length, M scored slots, T targets, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from retailsim_core.datasets.batch import Batch
from retailsim_core.datasets.tokens import PAD, mask_token
from retailsim_core.models.world_model import AUX_HEADS, ModelOutput, WorldModel


@dataclass(frozen=True)
class LossWeights:
    focal: float = 0.6  # w1 (design §5.6.1 phase 2)
    contrastive: float = 0.2  # w2
    basket_size: float = 0.08  # w3
    price_sensitivity: float = 0.08  # w4
    mission: float = 0.04  # w5, split evenly between mission type and mission focus
    basket_length: float = 0.04  # the number of products (simulation's size head, D53)

    @classmethod
    def focal_only(cls) -> LossWeights:
        return cls(
            focal=1.0,
            contrastive=0.0,
            basket_size=0.0,
            price_sensitivity=0.0,
            mission=0.0,
            basket_length=0.0,
        )

    def of_head(self, name: str) -> float:
        return {
            "basket_size": self.basket_size,
            "price_sensitivity": self.price_sensitivity,
            "mission_type": self.mission / 2,
            "mission_focus": self.mission / 2,
        }[name]


def focal_loss(log_p: torch.Tensor, gamma: float = 2.0) -> torch.Tensor:
    """FL = -(1 - p)^gamma log p, from the log-probabilities (T,) of the targets."""
    return -((1 - log_p.exp()) ** gamma) * log_p


def info_nce(
    model_hidden: torch.Tensor,
    projection: nn.Module,
    visible: torch.Tensor,
    generator: torch.Generator,
    temperature: float = 0.07,
) -> torch.Tensor:
    """InfoNCE over in-basket pairs: two random visible products of each basket are a positive pair,
    the other baskets' picks are negatives (symmetric). hidden (B, L + 1, D); visible (B, L)."""
    scores = (
        torch.rand(visible.shape, generator=generator)
        .to(visible.device)
        .masked_fill(~visible, -1.0)
    )
    top = scores.topk(min(2, visible.shape[1]), dim=1)
    ok = (top.values > -1.0).all(1) & (top.values.shape[1] == 2)  # baskets with >= 2 products
    if ok.sum() < 2:
        return model_hidden.sum() * 0.0
    rows = torch.nonzero(ok)[:, 0]
    z = F.normalize(
        projection(model_hidden[rows[:, None], top.indices[rows] + 1]), dim=-1
    )  # (n, 2, D)
    logits = z[:, 0] @ z[:, 1].T / temperature  # (n, n)
    labels = torch.arange(len(rows), device=logits.device)
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2


@dataclass
class LossParts:
    total: torch.Tensor
    parts: dict[str, float]


def slot_targets(targets: torch.Tensor, basket_targets: tuple[torch.Tensor, torch.Tensor] | None):
    """Slots (rows, cols) to score and, per target, its slot index and token. Masked or suffix
    positions are one slot with one target; a next-basket query (row, col 0) is one slot whose
    targets are every product of the basket."""
    rows, cols = torch.nonzero(targets != PAD, as_tuple=True)
    slot_of, tokens = torch.arange(len(rows)), targets[rows, cols].long()
    if basket_targets is not None and len(basket_targets[0]):
        q_rows, q_tokens = basket_targets
        unique_rows, inverse = torch.unique(q_rows, return_inverse=True)
        slot_of = torch.cat([slot_of, len(rows) + inverse])
        tokens = torch.cat([tokens, q_tokens.long()])
        rows = torch.cat([rows, unique_rows])
        cols = torch.cat([cols, torch.zeros_like(unique_rows)])
    return rows, cols, slot_of, tokens


def world_model_loss(
    model: WorldModel,
    out: ModelOutput,
    batch: Batch,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    given_mission: torch.Tensor,
    weights: LossWeights,
    generator: torch.Generator,
    contrastive_head: nn.Module,
    gamma: float = 2.0,
    temperature: float = 0.07,
    basket_targets: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> LossParts:
    """``targets`` (B, L): the true token at predicted positions, [PAD] elsewhere.
    ``basket_targets`` (rows, tokens): next-basket queries, every product of the basket a target
    of the single [MASK] at position 0. Products shown unmasked in a basket cannot fill its other
    slots."""
    rows, cols, slot_of, tokens = slot_targets(targets, basket_targets)
    shown = shown_products(inputs, targets, model.vocab_size)[rows]  # (M, V)
    log_p = model.slot_log_probs(out, rows, cols, shown)  # (M, V)
    target_log_p = log_p[slot_of, tokens]  # (T,)
    row_of_target = rows[slot_of]
    per_row = torch.bincount(row_of_target, minlength=len(inputs)).float()  # targets per row
    weight = 1.0 / per_row[row_of_target]
    n_rows = max(int((per_row > 0).sum()), 1)
    focal = (focal_loss(target_log_p, gamma) * weight).sum() / n_rows
    total, parts = weights.focal * focal, {"focal": focal.item()}
    if weights.contrastive > 0:
        n_products = model.vocab_size - 3
        visible = (inputs != PAD) & (targets == PAD) & (inputs <= n_products)
        nce = info_nce(out.hidden, contrastive_head, visible, generator, temperature)
        total, parts["contrastive"] = total + weights.contrastive * nce, nce.item()
    # The position-0 heads learn only from next-basket queries, where nothing of the basket is
    # shown: elsewhere the decoder sees most products (and the padding), so a head trained there
    # reads the answer off the input and is miscalibrated when it is asked before the trip (D58).
    queried = torch.zeros(len(inputs), dtype=torch.bool, device=inputs.device)
    if basket_targets is not None and len(basket_targets[0]):
        queried[basket_targets[0].long()] = True
    for name, (col, n_classes) in AUX_HEADS.items():
        w = weights.of_head(name)
        if w <= 0:
            continue
        # Only rows whose mission was not given: the head never sees the value it predicts.
        label = batch["basket_labels"][:, col] - 1
        label = label.masked_fill(given_mission | (label >= n_classes) | ~queried, -1)
        if (label >= 0).any():
            ce = F.cross_entropy(out.aux_logits[name], label, ignore_index=-1)
            total, parts[name] = total + w * ce, ce.item()
    if weights.basket_length > 0 and queried.any():
        length = basket_length(batch, model.vocab_size)[queried]
        logits = out.size_logits[queried]
        ce = F.cross_entropy(logits, (length - 1).clamp(0, logits.shape[1] - 1))
        total, parts["basket_length"] = total + weights.basket_length * ce, ce.item()
    parts["total"] = total.item()
    return LossParts(total=total, parts=parts)


def basket_length(batch: Batch, vocab_size: int) -> torch.Tensor:
    """(B,) number of products in each basket of the batch (before corruption)."""
    tokens = batch["tokens"]
    return ((tokens != PAD) & (tokens < mask_token(vocab_size))).sum(1)


def visible_products(inputs, targets, vocab_size: int):
    """(B, L) True where the input shows a product unmasked (a position without a target);
    specials never count. NumPy arrays or tensors alike."""
    return (targets == PAD) & (inputs >= 1) & (inputs <= vocab_size - 3)


def shown_products(inputs: torch.Tensor, targets: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """(B, V) True where a product token is shown unmasked in the basket input
    (``visible_products``)."""
    visible = visible_products(inputs, targets, vocab_size)
    shown = torch.zeros(inputs.shape[0], vocab_size, dtype=torch.bool, device=inputs.device)
    shown.scatter_(1, torch.where(visible, inputs, torch.zeros_like(inputs)).long(), True)
    shown[:, PAD] = False
    return shown
