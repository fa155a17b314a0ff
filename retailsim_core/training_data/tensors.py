"""T1–T6 batches for the world model (design §4.1–4.8), gathered from row-aligned arrays.

``TrainingSet`` joins the samples of some weeks once with everything they need as of their
week — the trip store (histories), the week-W customer snapshots, price features and store
features — into flat NumPy arrays. ``batch(indices)`` then only gathers and pads: no joins,
no Python loops over samples, so a batch costs a few vectorised copies.

Glossary: B batch, L basket length incl. [EOS], H history trips the encoder reads, U distinct
products of a basket's whole history, F history features (``history_features.py``).
Categorical codes are 1-based with 0 = missing/padding; continuous features are raw values
(the model normalises and embeds them; embedding widths are model config).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from retailsim_core.calendar import LGSR, SourceCalendar
from retailsim_core.ingest.lgsr import LIFESTAGE_CODES, PRICE_SENSITIVITY_CODES
from retailsim_core.training_data.batch import Batch, to_batch
from retailsim_core.training_data.batch_inputs import (
    BASKET_TYPES,
    MISSIONS,
    TripIndex,
    calendar_inputs,
    codes,
    customer_inputs,
    days_since_last_trip,
    history_alpha,
    history_inputs,
    ragged,
    store_inputs,
)
from retailsim_core.training_data.history_features import BasketContext
from retailsim_core.training_data.shelf import ShelfPrices
from retailsim_core.training_data.tokens import MAX_ITEMS, PAD, ProductVocab
from retailsim_core.training_data.trips import TripStore

SIZES = ("S", "M", "L")
PRICE_COLUMNS = (
    "actual_price",
    "log_price",
    "relative_price",
    "price_velocity",
    "price_acceleration",
    "promo_momentum",
    "discount_depth",
    "promo_flag",
    "is_imputed_price",
)
__all__ = ["BASKET_TYPES", "MISSIONS", "SIZES", "PRICE_COLUMNS", "ragged", "codes"]


@dataclass(frozen=True)
class TensorConfig:
    max_items: int = MAX_ITEMS  # basket products (design §4.7.5 case 5), [EOS] extra
    max_history_trips: int = 100  # most recent trips the encoder reads (H); every trip of every
    # product enters the history features


class TrainingSet:
    def __init__(
        self,
        samples: pl.DataFrame,
        store: TripStore,
        vocab: ProductVocab,
        affinity: pl.DataFrame,
        missions: pl.DataFrame,
        prices: pl.DataFrame,
        stores: pl.DataFrame,
        cfg: TensorConfig = TensorConfig(),
        shelf: ShelfPrices | None = None,
        calendar: SourceCalendar = LGSR,
    ):
        self.cfg, self.vocab, self.n, self.shelf = cfg, vocab, samples.height, shelf
        self.calendar = calendar
        self.index = TripIndex.build(store.trips, vocab)
        self.trips = self.index.arrays
        self.trip_tokens, self.trip_offsets = self.trips.tokens, self.trips.offsets
        self.trip_day, self.trip_context = self.trips.day, self.trips.mission
        self.trip_customer = self.index.customer
        trips = store.trips.with_row_index("row")
        s = samples.join(
            trips.select("basket_id", pl.col("row").alias("trip")),
            on="basket_id",
            how="left",
            maintain_order="left",
        )
        bounds = store.history_bounds(s["customer_id"], s["week"])
        self.hist_end = bounds["end"].to_numpy()
        self.full_hist_start = bounds["start"].to_numpy()  # whole history (baselines)
        self.hist_start = np.maximum(self.full_hist_start, self.hist_end - cfg.max_history_trips)
        basket = s.select("trip").join(
            trips, left_on="trip", right_on="row", how="left", maintain_order="left"
        )
        trip_row = s["trip"].to_numpy()
        self.basket_context = BasketContext(
            start=self.full_hist_start,
            end=self.hist_end,
            day=self.trip_day[trip_row],
            store=self.trips.store[trip_row],
            hour=self.trips.hour[trip_row],
            weekend=self.trips.weekend[trip_row],
        )
        self._targets(basket, prices)
        self._context(s, basket, affinity, missions, stores)
        self.shelf_rows = (
            shelf.rows_of(basket["store_id"], basket["week"]) if shelf is not None else None
        )

    def _targets(self, basket: pl.DataFrame, prices: pl.DataFrame) -> None:
        """Target products (highest-priced first when truncated) with their T4 price inputs.
        Products outside the vocabulary (first sold in a test week) are no target any method can
        rank; they are counted in ``item_oov`` so that recall still counts them as missed."""
        items = (
            basket.with_row_index("i")
            .select("i", "week", "store_id", pl.col("products"))
            .explode("products")
            .join(
                prices.select("product_id", "store_id", "week", *PRICE_COLUMNS),
                left_on=["products", "store_id", "week"],
                right_on=["product_id", "store_id", "week"],
                how="left",
            )
            .join(self.vocab.frame(), left_on="products", right_on="product_id", how="left")
            .sort(
                ["i", "actual_price", "products"], descending=[False, True, False], nulls_last=True
            )
        )
        n = basket.height
        self.item_oov = np.bincount(
            items.filter(pl.col("token").is_null())["i"].to_numpy(), minlength=n
        )
        items = items.filter(pl.col("token").is_not_null())
        self.item_tokens = items["token"].to_numpy().astype(np.int32)
        self.item_prices = items.select(
            pl.col(PRICE_COLUMNS).cast(pl.Float32).fill_null(0.0)
        ).to_numpy()
        counts = np.bincount(items["i"].to_numpy(), minlength=n).astype(np.int64)
        self.item_starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        self.item_counts = counts

    def _context(self, s, basket, affinity, missions, stores) -> None:
        self.t1_numeric, self.t1_names, self.t1_has_snapshot = customer_inputs(
            s, affinity, missions
        )
        self.t1_codes = basket.select(
            codes("cust_price_sensitivity", PRICE_SENSITIVITY_CODES),
            codes("cust_lifestage", LIFESTAGE_CODES),
        ).to_numpy()
        self.t1_alpha = history_alpha(s["history_trips"].to_numpy())
        date = basket["shop_date"]
        self.basket_day = date.cast(pl.Int32).to_numpy()
        since = days_since_last_trip(self.index, self.basket_context, self.hist_start)
        self.t3 = calendar_inputs(
            date, basket["shop_hour"].to_numpy(), s["week"].to_numpy(), since, self.calendar
        )
        self.t5_numeric, self.t5_codes, self.t5_is_new = store_inputs(basket, stores)
        self.t6 = basket.select(
            codes("basket_type", BASKET_TYPES),
            codes("basket_dominant_mission", MISSIONS),
            codes("basket_price_sensitivity", PRICE_SENSITIVITY_CODES),
            codes("basket_size", SIZES),
        ).to_numpy()

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, indices) -> Batch:
        """A whole batch: ``indices`` is the list of sample rows (use ``batch_size=None``)."""
        idx = np.asarray(indices, dtype=np.int64)
        cfg, eos = self.cfg, self.vocab.eos
        n_items = np.minimum(self.item_counts[idx], cfg.max_items)
        L = int(n_items.max()) + 1
        tokens = ragged(self.item_tokens, self.item_starts[idx], n_items, L)
        tokens[np.arange(len(idx)), n_items] = eos  # [EOS] right after the last item
        prices = ragged(self.item_prices, self.item_starts[idx], n_items, L)  # (B, L, 8)
        ctx = self.basket_context
        history = history_inputs(
            self.index,
            self.hist_start[idx],
            BasketContext(
                start=ctx.start[idx],
                end=ctx.end[idx],
                day=ctx.day[idx],
                store=ctx.store[idx],
                hour=ctx.hour[idx],
                weekend=ctx.weekend[idx],
            ),
        )
        shelf = {} if self.shelf is None else {"shelf": self.shelf.dense(self.shelf_rows[idx])}
        return to_batch(
            shelf
            | {
                "tokens": tokens,
                "item_mask": tokens != PAD,
                "item_prices": prices,
                **history,
                "customer_codes": self.t1_codes[idx],
                "customer_numeric": self.t1_numeric[idx],
                "history_alpha": self.t1_alpha[idx],
                "calendar": self.t3[idx],
                "store_codes": self.t5_codes[idx],
                "store_numeric": self.t5_numeric[idx],
                "store_is_new": self.t5_is_new[idx],
                "basket_labels": self.t6[idx],
            }
        )


class LengthBucketSampler:
    """Batches of sample rows of one history bucket each (design §5.6.0), shuffled within buckets
    and in batch order with ``seed + epoch``: similar lengths per batch, little padding."""

    def __init__(
        self, buckets: np.ndarray, batch_size: int, seed: int = 0, drop_last: bool = False
    ):
        self.buckets, self.batch_size, self.seed, self.drop_last, self.epoch = (
            np.asarray(buckets),
            batch_size,
            seed,
            drop_last,
            0,
        )

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        rng = np.random.default_rng([self.seed, self.epoch])
        batches = []
        for b in np.unique(self.buckets):  # a handful of buckets
            rows = rng.permutation(np.flatnonzero(self.buckets == b))
            cut = len(rows) - len(rows) % self.batch_size if self.drop_last else len(rows)
            batches += [rows[i : i + self.batch_size] for i in range(0, cut, self.batch_size)]
        for i in rng.permutation(len(batches)):
            yield batches[i].tolist()

    def __len__(self) -> int:
        sizes = np.bincount(np.unique(self.buckets, return_inverse=True)[1])
        return int(
            (sizes // self.batch_size).sum()
            if self.drop_last
            else np.ceil(sizes / self.batch_size).sum()
        )
