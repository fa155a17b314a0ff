"""Decoder inputs for training and evaluation (decision D34).

Two corruptions of a padded (B, L) token matrix, both returning (inputs, targets) with targets
[PAD] wherever no loss is taken:
- BERT4Rec masking (``tokens.mask_items``): a share of the products is chosen and predicted
  from the rest of the basket;
- suffix masking: the basket is cut at a random position c (an item or the [EOS]); position c
  becomes [MASK] and everything after it [PAD]. That is exactly one step of generation (spec
  §4.3.2: fill the next slot until [EOS]), and c = 0 is the next-basket query.
"""

from __future__ import annotations

import numpy as np

from retailsim_core.tokens import PAD, ProductVocab, mask_items


def suffix_mask(tokens: np.ndarray, vocab: ProductVocab, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    length = (tokens != PAD).sum(1)                                                  # items + [EOS]
    cut = np.floor(rng.random(len(tokens)) * length).astype(np.int64)                # uniform in 0..n_items
    cols = np.arange(tokens.shape[1])[None, :]
    inputs = np.where(cols < cut[:, None], tokens, PAD)
    inputs[np.arange(len(tokens)), cut] = vocab.mask
    targets = np.where(cols == cut[:, None], tokens, PAD)
    return inputs.astype(tokens.dtype), targets.astype(tokens.dtype)


def corrupt(tokens: np.ndarray, vocab: ProductVocab, rate: float, suffix_share: float,
            rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per basket: suffix masking with probability ``suffix_share``, else BERT4Rec masking."""
    bert = mask_items(tokens, vocab, rate, rng)
    s_inputs, s_targets = suffix_mask(tokens, vocab, rng)
    use_suffix = (rng.random(len(tokens)) < suffix_share)[:, None]
    return np.where(use_suffix, s_inputs, bert.inputs), np.where(use_suffix, s_targets, bert.targets)


def evaluation_mask(tokens: np.ndarray, vocab: ProductVocab, rate: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Masked-item evaluation: chosen products all become [MASK] (no random or kept tokens)."""
    chosen = mask_items(tokens, vocab, rate, np.random.default_rng(seed)).targets != PAD
    return np.where(chosen, vocab.mask, tokens).astype(tokens.dtype), np.where(chosen, tokens, PAD).astype(tokens.dtype)


def next_basket_query(batch_size: int, vocab: ProductVocab) -> np.ndarray:
    """(B, 1) inputs asking for the first product of the basket: a single [MASK] slot."""
    return np.full((batch_size, 1), vocab.mask, dtype=np.int32)
