"""Decoder inputs for training and evaluation (decision D34).

Two corruptions of a padded (B, L) token matrix, both returning (inputs, targets) with targets
[PAD] wherever no loss is taken:
- BERT4Rec masking (``tokens.mask_items``): a share of the products is chosen and predicted
  from the rest of the basket;
- suffix masking: the basket is cut at a random item position c; position c becomes [MASK] and
  everything after it [PAD]. That is exactly one step of generation (design §4.3.2: fill the next
  slot given the ones before; how many slots a basket has comes from the size head, D53), and
  c = 0 is the next-basket query.
"""

from __future__ import annotations

import numpy as np

from retailsim_core.datasets.tokens import PAD, ProductVocab, mask_items


def shuffle_items(
    tokens: np.ndarray, prices: np.ndarray, vocab: ProductVocab, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Random order of each basket's products ([EOS] and [PAD] stay where they are), prices moved
    along. Baskets are sets: in a random order the first slot's target is a random member of the
    basket, so the next-basket query (a single [MASK]) learns P(product in basket) / size, and
    generation is order-free (decision D34)."""
    is_item = (tokens != PAD) & (tokens != vocab.eos)
    keys = np.where(is_item, rng.random(tokens.shape), 2.0 + np.arange(tokens.shape[1])[None, :])
    order = np.argsort(keys, axis=1, kind="stable")
    rows = np.arange(len(tokens))[:, None]
    return tokens[rows, order], prices[rows, order]


def suffix_mask(
    tokens: np.ndarray, vocab: ProductVocab, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    n_items = np.maximum(((tokens != PAD) & (tokens != vocab.eos)).sum(1), 1)
    cut = np.floor(rng.random(len(tokens)) * n_items).astype(np.int64)  # uniform in 0..n_items - 1
    cols = np.arange(tokens.shape[1])[None, :]
    inputs = np.where(cols < cut[:, None], tokens, PAD)
    inputs[np.arange(len(tokens)), cut] = vocab.mask
    targets = np.where(cols == cut[:, None], tokens, PAD)
    return inputs.astype(tokens.dtype), targets.astype(tokens.dtype)


def corrupt(
    tokens: np.ndarray,
    vocab: ProductVocab,
    rate: float,
    suffix_share: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Per basket: suffix masking with probability ``suffix_share``, else BERT4Rec masking."""
    bert = mask_items(tokens, vocab, rate, rng)
    s_inputs, s_targets = suffix_mask(tokens, vocab, rng)
    use_suffix = (rng.random(len(tokens)) < suffix_share)[:, None]
    return np.where(use_suffix, s_inputs, bert.inputs), np.where(
        use_suffix, s_targets, bert.targets
    )


def basket_queries(
    tokens: np.ndarray,
    inputs: np.ndarray,
    targets: np.ndarray,
    vocab: ProductVocab,
    share: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Turn a ``share`` of the baskets into next-basket queries: input [MASK] then [PAD]s, and every
    product of the basket a target of that one slot (returned as (rows, tokens) pairs)."""
    query = rng.random(len(tokens)) < share
    inputs, targets = inputs.copy(), targets.copy()
    inputs[query], targets[query] = PAD, PAD
    inputs[query, 0] = vocab.mask
    r, c = np.nonzero(query[:, None] & (tokens >= 1) & (tokens <= vocab.n_products))
    return inputs, targets, (r, tokens[r, c])


def evaluation_mask(
    tokens: np.ndarray, vocab: ProductVocab, rate: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Masked-item evaluation: chosen products all become [MASK] (no random or kept tokens)."""
    chosen = mask_items(tokens, vocab, rate, np.random.default_rng(seed)).targets != PAD
    return np.where(chosen, vocab.mask, tokens).astype(tokens.dtype), np.where(
        chosen, tokens, PAD
    ).astype(tokens.dtype)
