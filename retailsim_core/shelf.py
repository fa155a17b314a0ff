"""Shelf prices: what every product cost at the basket's store *last week* (decision D39).

The decoder scores every candidate product, so it needs every candidate's price, not only the
prices of the basket's own items (T4). Week-W prices are derived from week-W sales (observed vs
imputed reveals which products sold), so the candidate-side prices of a week-W basket are the
store's week W-1 price features: no week-W purchase can leak in, and counterfactual simulation
sets them directly (``with_price_multipliers``).

Glossary: R store-weeks, V vocabulary, S = ``len(SHELF_FEATURES)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import scipy.sparse as sp
import torch

from retailsim_core.tokens import ProductVocab

SHELF_FEATURES = ("log_relative_price", "discount_depth", "promo_flag", "available")
PROMO_DEPTH = 0.05      # spec §2.2.2: promotion at a depth above 5%


@dataclass(frozen=True)
class ShelfPrices:
    keys: pl.DataFrame                 # store_id, week (the basket week W), row
    matrices: tuple[sp.csr_matrix, ...]   # one (R, V) matrix per shelf feature

    @classmethod
    def build(cls, price_features: pl.DataFrame, vocab: ProductVocab) -> ShelfPrices:
        """``price_features`` rows of week W-1 serve baskets of week W."""
        cells = (price_features.select("store_id", (pl.col("week") + 1).alias("week"), "product_id", "relative_price",
                                       "discount_depth", "promo_flag")
                 .join(vocab.frame(), on="product_id", how="inner"))
        keys = cells.select("store_id", "week").unique().sort("store_id", "week").with_row_index("row")
        cells = cells.join(keys, on=["store_id", "week"], how="left")
        r, c = cells["row"].to_numpy(), cells["token"].to_numpy()
        values = [np.log(np.clip(cells["relative_price"].fill_null(1.0).to_numpy(), 1e-3, None)),
                  cells["discount_depth"].fill_null(0.0).clip(0.0, 1.0).to_numpy(),
                  cells["promo_flag"].fill_null(False).cast(pl.Float64).to_numpy(), np.ones(len(r))]
        shape = (keys.height, vocab.size)
        return cls(keys=keys, matrices=tuple(sp.csr_matrix((v.astype(np.float32), (r, c)), shape=shape) for v in values))

    def rows_of(self, store_ids: pl.Series, weeks: pl.Series) -> np.ndarray:
        """Row of each (store, week); -1 where the store had no priced cell the week before."""
        frame = pl.DataFrame({"store_id": store_ids, "week": weeks.cast(pl.Int64)})
        joined = frame.join(self.keys.with_columns(pl.col("week").cast(pl.Int64)), on=["store_id", "week"],
                            how="left", maintain_order="left")
        return joined["row"].fill_null(-1).cast(pl.Int64).to_numpy()

    def dense(self, rows: np.ndarray) -> np.ndarray:
        """(B, V, S) float32; all zero for a row of -1 (a store first seen this week)."""
        out = np.zeros((len(rows), self.matrices[0].shape[1], len(self.matrices)), dtype=np.float32)
        ok = rows >= 0
        if ok.any():
            for k, m in enumerate(self.matrices):
                out[ok, :, k] = m[rows[ok]].toarray()
        return out


def with_price_multipliers(shelf: torch.Tensor, log_multiplier: torch.Tensor) -> torch.Tensor:
    """Shelf features after multiplying prices by ``exp(log_multiplier)`` (V,) or (B, V),
    differentiably: log relative price shifts by log m; depth = 1 - (1 - depth) * m (>= 0);
    the promo flag follows the new depth. Unavailable products stay unavailable. (B, V, S)."""
    available = shelf[..., 3]
    m = torch.exp(log_multiplier)
    log_rel = shelf[..., 0] + log_multiplier * available
    depth = torch.clamp(1 - (1 - shelf[..., 1]) * m, min=0.0) * available
    promo = (depth > PROMO_DEPTH).to(shelf.dtype) * available
    return torch.stack([log_rel, depth, promo, available], dim=-1)
