"""Shelf prices: what every product costs at the basket's store in its week (decisions D39, D45).

The decoder scores every candidate product, so it needs every candidate's price, not only the
prices of the basket's own items (T4). A week-W cell of the basket's own store is derived from
week-W sales (observed vs imputed, and promotional prices, reveal what sold there), so it is
never used. The shelf of store s in week W is assembled from what the retailer knows before
the week without that leak:

- the *regular* price position: the store's week W-1 relative price with W-1's discount removed;
- the week's *promotion depth*: the mean observed depth of the product at the OTHER stores of the
  same region in week W (leave-one-store-out; promotions are planned by region, and in a real
  deployment the promotion calendar is an input known in advance), 0 where none of them sold it;
- log relative price = regular + log(1 - depth); the promo flag; an available flag (the store's
  assortment to date, i.e. a W-1 price row);
- whether the product is on display or in the mailer at the store that week, from the source's
  promotion plan (``source_promotions``, D86, D87): set before the week, whether or not anything
  sells; 0 where the source has no plan (LGSR).

A source without regions (null) is one zone: the chain.

Counterfactual simulation sets these directly (``with_price_multipliers``).

Glossary: R store-weeks, C their cells (assortment products), V vocabulary,
S = ``len(SHELF_FEATURES)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import torch

from retailsim_core.datasets.tokens import ProductVocab
from retailsim_core.storage.mapped import MappedArrays

SHELF_FEATURES = (
    "log_relative_price",
    "discount_depth",
    "promo_flag",
    "available",
    "display",
    "mailer",
)
PLAN_SCHEMA = pl.Schema(  # the promotion plan a shelf reads (``source_promotions`` cells)
    {
        "product_id": pl.String,
        "store_id": pl.String,
        "week": pl.Int64,
        "display": pl.Boolean,
        "mailer": pl.Boolean,
    }
)
PROMO_DEPTH = 0.05  # design §2.2.2: promotion at a depth above 5%
MAX_DEPTH = 0.7  # design §2.2.2 business rule: deeper discounts are data errors


@dataclass(frozen=True)
class ShelfPrices:
    """The shelf of some store-weeks as cells: row r's products are
    ``tokens[indptr[r] : indptr[r + 1]]`` (ascending) with their features in ``values``, so a
    batch's (B, V, S) block is one ragged gather and one scatter. The arrays may be mapped
    (``ShelfWriter``): a batch then reads its rows' cells only."""

    keys: pl.DataFrame  # store_id, week (the basket week W), row
    indptr: np.ndarray  # (R + 1,) int64
    tokens: np.ndarray  # (C,) int32 the cells' product tokens
    values: np.ndarray  # (C, S) float32 the cells' shelf features
    vocab_size: int  # V

    @classmethod
    def build(
        cls,
        price_features: pl.DataFrame,
        observed: pl.DataFrame,
        store_regions: pl.DataFrame,
        vocab: ProductVocab,
        plan: pl.DataFrame | None = None,
    ) -> ShelfPrices:
        """``price_features`` rows of week W-1 give the store's assortment and regular prices for
        baskets of week W; ``observed`` (product_id, store_id, store_region, week, discount_depth:
        derived_prices cells observed that week) gives week W's promotions via ``regional_depth``;
        ``store_regions``: store_id -> store_region; ``plan``: week W's promotion plan
        (``PLAN_SCHEMA``; None: no plan, display and mailer 0)."""
        if plan is None:
            plan = pl.DataFrame(schema=PLAN_SCHEMA)
        regular = price_features.select(
            "store_id",
            (pl.col("week").cast(pl.Int64) + 1).alias("week"),
            "product_id",
            (
                pl.col("relative_price").fill_null(1.0).clip(1e-3).log()
                - (1 - pl.col("discount_depth").fill_null(0.0).clip(0.0, MAX_DEPTH)).log()
            ).alias("regular_log_relative"),
        ).join(vocab.frame(), on="product_id", how="inner")
        cells = regular.join(
            regional_depth(
                observed, regular.select("store_id", "week", "product_id"), store_regions
            ),
            on=["store_id", "week", "product_id"],
            how="left",
        )
        cells = cells.join(
            plan.select(PLAN_SCHEMA.names()).cast(dict(PLAN_SCHEMA)),
            on=["store_id", "week", "product_id"],
            how="left",
        ).with_columns(pl.col("depth").fill_null(0.0), pl.col("display", "mailer").fill_null(False))
        keys = (
            cells.select("store_id", "week").unique().sort("store_id", "week").with_row_index("row")
        )
        cells = cells.join(keys, on=["store_id", "week"], how="left").sort("row", "token")
        depth = cells["depth"].to_numpy()
        values = np.stack(
            [
                cells["regular_log_relative"].to_numpy() + np.log1p(-depth),
                depth,
                (depth > PROMO_DEPTH).astype(np.float64),
                np.ones(len(depth)),
                cells["display"].cast(pl.Float64).to_numpy(),
                cells["mailer"].cast(pl.Float64).to_numpy(),
            ],
            axis=-1,
        )  # (cells, S)
        counts = np.bincount(cells["row"].to_numpy(), minlength=keys.height)
        return cls(
            keys=keys,
            indptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            tokens=cells["token"].to_numpy().astype(np.int32),
            values=values.astype(np.float32).reshape(-1, len(SHELF_FEATURES)),
            vocab_size=vocab.size,
        )

    @classmethod
    def concat(cls, parts: list[ShelfPrices], vocab: ProductVocab) -> ShelfPrices:
        """One shelf from shelves of disjoint store-weeks (e.g. one per week): the same features
        for every (store, week) as one ``build`` over all their rows."""
        writer = ShelfWriter(vocab)
        for part in parts:
            writer.append(part)
        return writer.shelf()

    def rows_of(self, store_ids: pl.Series, weeks: pl.Series) -> np.ndarray:
        """Row of each (store, week); -1 where the store had no priced cell the week before."""
        frame = pl.DataFrame({"store_id": store_ids, "week": weeks.cast(pl.Int64)})
        joined = frame.join(
            self.keys.with_columns(pl.col("week").cast(pl.Int64)),
            on=["store_id", "week"],
            how="left",
            maintain_order="left",
        )
        return joined["row"].fill_null(-1).cast(pl.Int64).to_numpy()

    def dense(self, rows: np.ndarray) -> np.ndarray:
        """(B, V, S) float32; all zero for a row of -1 (a store first seen this week)."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.zeros((len(rows), self.vocab_size, len(SHELF_FEATURES)), dtype=np.float32)
        known = rows >= 0
        starts = self.indptr[np.where(known, rows, 0)]
        counts = np.where(known, self.indptr[np.where(known, rows + 1, 0)] - starts, 0)
        owner = np.repeat(np.arange(len(rows)), counts)
        cells = np.arange(counts.sum()) + np.repeat(starts - (np.cumsum(counts) - counts), counts)
        out[owner, self.tokens[cells]] = self.values[cells]
        return out


class ShelfWriter:
    """Shelves of disjoint store-weeks appended one after another (week by week), in memory or,
    given ``mapped``, on its disk: the shelf then costs page cache, not process memory."""

    def __init__(self, vocab: ProductVocab, mapped: MappedArrays | None = None):
        self.vocab, self.mapped, self.keys = vocab, mapped, []
        self.rows = self.cells = 0
        self.parts: dict[str, list[np.ndarray]] = {"indptr": [np.zeros(1, np.int64)]}
        self.parts |= {"tokens": [], "values": []}

    def append(self, part: ShelfPrices) -> None:
        self.keys.append(part.keys.with_columns(pl.col("row") + pl.lit(self.rows, pl.UInt32)))
        chunk = {
            "indptr": part.indptr[1:] + self.cells,
            "tokens": part.tokens,
            "values": part.values,
        }
        for name, array in chunk.items():
            self.parts[name].append(array)
        if self.mapped is not None:  # the cells go to disk now, not at the end
            self._spill()
        self.rows, self.cells = self.rows + part.keys.height, self.cells + len(part.tokens)

    def _spill(self) -> None:
        if not hasattr(self, "writers"):
            self.writers = {name: self.mapped.writer(f"shelf_{name}") for name in self.parts}
        for name, parts in self.parts.items():
            for array in parts:
                self.writers[name].append(array)
            parts.clear()

    def shelf(self) -> ShelfPrices:
        s = len(SHELF_FEATURES)
        empty = {"tokens": np.zeros(0, np.int32), "values": np.zeros((0, s), np.float32)}
        if self.mapped is None:
            arrays = {
                name: np.concatenate(parts) if parts else empty[name]
                for name, parts in self.parts.items()
            }
        else:
            for name, array in empty.items():  # a dtype for a shelf of no cells
                self.parts[name].append(array)
            self._spill()
            for writer in self.writers.values():
                writer.close()
            arrays = {name: self.mapped.read(w) for name, w in self.writers.items()}
        keys = (
            pl.concat(self.keys)
            if self.keys
            else pl.DataFrame(schema={"row": pl.UInt32, "store_id": pl.String, "week": pl.Int64})
        )
        return ShelfPrices(keys=keys, vocab_size=self.vocab.size, **arrays)


def regional_depth(
    observed: pl.DataFrame, cells: pl.DataFrame, store_regions: pl.DataFrame
) -> pl.DataFrame:
    """For each (store_id, week, product_id) of ``cells``: the mean observed discount depth of the
    product in that week at the other stores of the store's region (null where none sold it).
    The store's own cell is subtracted from the regional sums, so nothing the store sold that
    week enters its own shelf."""
    obs = observed.select(
        "product_id",
        "store_id",
        "store_region",
        pl.col("week").cast(pl.Int64),
        pl.col("discount_depth").fill_null(0.0).clip(0.0, MAX_DEPTH),
    )
    zone = obs.group_by("product_id", "store_region", "week").agg(
        total=pl.col("discount_depth").sum(), n=pl.len()
    )
    region_of = store_regions.select("store_id", "store_region").unique(
        subset="store_id", keep="first"
    )
    own = obs.select("store_id", "week", "product_id", pl.col("discount_depth").alias("own"))
    return (
        cells.with_columns(pl.col("week").cast(pl.Int64))
        .join(region_of, on="store_id", how="inner")
        .join(zone, on=["product_id", "store_region", "week"], how="inner", nulls_equal=True)
        .join(own, on=["store_id", "week", "product_id"], how="left")
        .with_columns(others=pl.col("n") - pl.col("own").is_not_null().cast(pl.UInt32))
        .filter(pl.col("others") > 0)
        .select(
            "store_id",
            "week",
            "product_id",
            depth=(pl.col("total") - pl.col("own").fill_null(0.0)) / pl.col("others"),
        )
    )


def with_price_multipliers(shelf: torch.Tensor, log_multiplier: torch.Tensor) -> torch.Tensor:
    """Shelf features after multiplying prices by ``exp(log_multiplier)`` (V,) or (B, V),
    differentiably: log relative price shifts by log m; depth = 1 - (1 - depth) * m (>= 0);
    the promo flag follows the new depth. Unavailable products stay unavailable; display and
    mailer are not prices and stay as they are. (B, V, S)."""
    available = shelf[..., 3]
    m = torch.exp(log_multiplier)
    log_rel = shelf[..., 0] + log_multiplier * available
    depth = torch.clamp(1 - (1 - shelf[..., 1]) * m, min=0.0) * available
    promo = (depth > PROMO_DEPTH).to(shelf.dtype) * available
    return torch.cat([torch.stack([log_rel, depth, promo, available], dim=-1), shelf[..., 4:]], -1)
