"""What the world model's passes hand on: the encoded contexts (``WorldModel.encode``) and the
decoder's output with the heads' inputs (``WorldModel.decode``). Dimensions as in
``world_model.py``."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class ModelOutput:
    hidden: torch.Tensor  # (B, L + 1, D) decoder states, position 0 = context token
    repeat: tuple | None  # RepeatHead encodings of the history products
    repeat_products: torch.Tensor | None  # (B, U) their tokens, [PAD] in unused slots
    shelf: torch.Tensor | None  # (B, V, 2 + P) candidate price and promotion features
    season: torch.Tensor | None = None  # (B, V, 2) products' seasonal lifts on the basket's day
    has_history: torch.Tensor | None = None  # (B,) the customer has at least one earlier trip
    aux_logits: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> (B, classes)
    size_logits: torch.Tensor | None = None  # (B, max_items): P(basket holds k + 1 products)


@dataclass
class Encoded:
    """What ``WorldModel.encode`` gives the decoder and the heads of a context's every slot."""

    states: torch.Tensor  # (B, H, D) encoder states
    history_mask: torch.Tensor  # (B, H) real history trips
    context: torch.Tensor  # (B, D) context token
    repeat: tuple | None  # RepeatHead encodings of the history products
    repeat_products: torch.Tensor | None  # (B, U)
    shelf: torch.Tensor | None  # (B, V, 2 + P)
    season: torch.Tensor | None  # (B, V, 2)
