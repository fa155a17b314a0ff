"""T2 product tokens (design §4.3) and masked-item corruption (design §4.3.2, BERT4Rec).

Vocabulary: ``0 = [PAD]``, products ``1..N`` (sorted product ids), ``N+1 = [MASK]``,
``N+2 = [EOS]``.
A basket is its product tokens followed by one [EOS]; baskets longer than ``max_items`` are
truncated to their most expensive items, in training and at inference (D120; design §4.7.5
case 5 skipped them in training).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

PAD = 0
MAX_ITEMS = 50  # products a basket holds at most (design §4.7.5 case 5); [EOS] comes extra
# The two specials after the products, by their distance from the end of the vocabulary.


def mask_token(vocab_size: int) -> int:
    """[MASK]: the second-to-last token."""
    return vocab_size - 2


def eos_token(vocab_size: int) -> int:
    """[EOS]: the last token."""
    return vocab_size - 1


@dataclass(frozen=True)
class ProductVocab:
    products: tuple[str, ...]  # index i holds token i + 1

    @classmethod
    def from_products(cls, product_ids) -> ProductVocab:
        return cls(tuple(sorted(set(product_ids))))

    @property
    def n_products(self) -> int:
        return len(self.products)

    @property
    def mask(self) -> int:
        return mask_token(self.size)

    @property
    def eos(self) -> int:
        return eos_token(self.size)

    @property
    def size(self) -> int:
        return self.n_products + 3

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "product_id": list(self.products),
                "token": np.arange(1, self.n_products + 1, dtype=np.int32),
            }
        )

    def encode(self, baskets: pl.Series) -> pl.Series:
        """List[str] baskets -> List[i32] tokens with [EOS] appended; unknown products raise."""
        lookup = dict(zip(self.products, range(1, self.n_products + 1), strict=True))
        flat = baskets.explode().drop_nulls()
        missing = set(flat.unique().to_list()) - lookup.keys()
        if missing:
            raise KeyError(f"products outside the vocabulary: {sorted(missing)[:5]}")
        tokens = flat.replace_strict(lookup, return_dtype=pl.Int32).to_numpy()
        # Rebuild the lists with one [EOS] after each: offsets grow by one per basket.
        lengths = baskets.list.len().to_numpy().astype(np.int64) + 1
        ends = np.cumsum(lengths)
        values = np.full(int(ends[-1]) if len(ends) else 0, self.eos, dtype=np.int32)
        keep = np.ones(len(values), dtype=bool)
        keep[ends - 1] = False
        values[keep] = tokens
        offsets = np.concatenate([[0], ends]).astype(np.int32)
        return pl.Series(
            baskets.name, pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))
        )


@dataclass(frozen=True)
class MaskedBatch:
    inputs: np.ndarray  # (B, L) tokens after corruption
    targets: np.ndarray  # (B, L) original token at chosen positions, PAD (no loss) elsewhere
    positions: np.ndarray  # (K, 2) (row, column) of every chosen position


def mask_items(
    tokens: np.ndarray, vocab: ProductVocab, rate: float, rng: np.random.Generator
) -> MaskedBatch:
    """BERT4Rec corruption of a padded (B, L) token matrix: choose ``rate`` of the product
    positions (never [PAD] or [EOS]); of those, 80% become [MASK], 10% a random product, 10% stay.
    Every basket gets at least one chosen position. Targets are PAD everywhere else."""
    is_product = (tokens >= 1) & (tokens <= vocab.n_products)  # (B, L)
    chosen = is_product & (rng.random(tokens.shape) < rate)
    # A basket with no chosen position gets one, uniformly among its products.
    none = is_product.any(1) & ~chosen.any(1)
    if none.any():
        scores = np.where(is_product[none], rng.random(is_product[none].shape), -1.0)
        chosen[np.flatnonzero(none), scores.argmax(1)] = True
    u = rng.random(tokens.shape)
    inputs = tokens.copy()
    inputs[chosen & (u < 0.8)] = vocab.mask
    swap = chosen & (u >= 0.8) & (u < 0.9)
    inputs[swap] = rng.integers(1, vocab.n_products + 1, int(swap.sum()))
    targets = np.where(chosen, tokens, PAD)
    return MaskedBatch(inputs=inputs, targets=targets, positions=np.argwhere(chosen))


def pad_baskets(tokens: pl.Series, max_len: int | None = None) -> np.ndarray:
    """List[i32] -> (B, L) int32 matrix padded with [PAD] (L = longest basket or ``max_len``)."""
    lengths = tokens.list.len().to_numpy().astype(np.int64)
    width = int(lengths.max()) if max_len is None else max_len
    out = np.zeros((len(tokens), width), dtype=np.int32)
    flat = tokens.explode().to_numpy()
    rows = np.repeat(np.arange(len(tokens)), lengths)
    starts = np.cumsum(lengths) - lengths
    cols = np.arange(lengths.sum()) - np.repeat(starts, lengths)
    keep = cols < width
    out[rows[keep], cols[keep]] = flat[keep]
    return out
