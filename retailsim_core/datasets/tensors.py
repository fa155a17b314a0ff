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
from retailsim_core.datasets.batch import Batch, to_batch
from retailsim_core.datasets.batch_inputs import (
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
from retailsim_core.datasets.history_features import BasketContext
from retailsim_core.datasets.shelf import ShelfPrices
from retailsim_core.datasets.tokens import MAX_ITEMS, PAD, ProductVocab
from retailsim_core.datasets.trips import TripStore
from retailsim_core.ingest.lgsr import LIFESTAGE_CODES, PRICE_SENSITIVITY_CODES
from retailsim_core.storage.mapped import ChunkedArrays, MappedArrays

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


CHUNK_ROWS = 200_000  # samples per build step: bounds the joins' memory (a few hundred MB)


class TrainingSet:
    """Row-aligned arrays of some samples. Built ``CHUNK_ROWS`` samples at a time, so the joins
    hold one chunk; given ``mapped``, every per-sample and per-item array lives on disk and a
    batch releases the pages it read: memory stays one batch whatever the number of samples
    (D97). Without it, the arrays are in memory."""

    def __init__(
        self,
        samples: pl.DataFrame,
        store: TripStore,
        vocab: ProductVocab,
        affinity: pl.DataFrame | pl.LazyFrame,
        missions: pl.DataFrame | pl.LazyFrame,
        prices: pl.DataFrame | pl.LazyFrame,
        stores: pl.DataFrame,
        cfg: TensorConfig = TensorConfig(),
        shelf: ShelfPrices | None = None,
        calendar: SourceCalendar = LGSR,
        mapped: MappedArrays | None = None,
        index: TripIndex | None = None,
    ):
        """``affinity``, ``missions`` and ``prices`` may be lazy (scans): a chunk reads only the
        rows its samples join to. ``index``: the trip store's ``TripIndex`` when already built."""
        self.cfg, self.vocab, self.n, self.shelf = cfg, vocab, samples.height, shelf
        self.calendar, self.mapped = calendar, mapped
        self.index = index if index is not None else TripIndex.build(store.trips, vocab, mapped)
        self.trips = self.index.arrays
        self.trip_tokens, self.trip_offsets = self.trips.tokens, self.trips.offsets
        self.trip_day, self.trip_context = self.trips.day, self.trips.mission
        self.trip_customer = self.index.customer
        # Each basket's trip row by its id (two columns in one chunk): a join against the whole
        # store would copy a store on disk, every column, into memory (its parts are chunks).
        trips = store.trips.select("basket_id").with_row_index("row").rechunk()
        columns = ChunkedArrays(mapped)
        for lo in range(0, max(self.n, 1), CHUNK_ROWS):
            chunk = samples.slice(lo, CHUNK_ROWS)
            weeks = pl.col("week").is_in(chunk["week"].unique().implode())
            weekly = [f.lazy().filter(weeks) for f in (affinity, missions, prices)]
            columns.append(self._chunk(chunk, store, trips, *weekly, stores))
        for name, array in columns.finish().items():
            setattr(self, name, array)
        self.item_starts = columns.put(
            "item_starts", (np.cumsum(self.item_counts) - self.item_counts).astype(np.int64)
        )
        self.basket_context = BasketContext(
            start=self.full_hist_start,
            end=self.hist_end,
            day=self.basket_trip_day,
            store=self.basket_store,
            hour=self.basket_hour,
            weekend=self.basket_weekend,
        )

    def _chunk(self, s, store, trips, affinity, missions, prices, stores) -> dict[str, np.ndarray]:
        """Every per-sample and per-item array of the samples ``s``."""
        s = s.join(
            trips.select("basket_id", pl.col("row").alias("trip")),
            on="basket_id",
            how="left",
            maintain_order="left",
        )
        bounds = store.history_bounds(s["customer_id"], s["week"])
        hist_end = bounds["end"].to_numpy()
        start = bounds["start"].to_numpy()  # whole history (baselines)
        hist_start = np.maximum(start, hist_end - self.cfg.max_history_trips)
        trip_row = s["trip"].to_numpy()
        basket = pl.concat([s.select("trip"), store.trips[trip_row]], how="horizontal")
        a = self.trips
        ctx = BasketContext(
            start=start,
            end=hist_end,
            day=a.day[trip_row],
            store=a.store[trip_row],
            hour=a.hour[trip_row],
            weekend=a.weekend[trip_row],
        )
        out = {"hist_end": hist_end, "full_hist_start": start, "hist_start": hist_start}
        out |= {
            "basket_trip_day": ctx.day,
            "basket_store": ctx.store,
            "basket_hour": ctx.hour,
            "basket_weekend": ctx.weekend,
        }
        out |= _targets(basket, prices, self.vocab)
        out |= self._context(s, basket, affinity, missions, stores, ctx, hist_start)
        if self.shelf is not None:
            out["shelf_rows"] = self.shelf.rows_of(basket["store_id"], basket["week"])
        return out

    def _context(self, s, basket, affinity, missions, stores, ctx, hist_start) -> dict:
        keys = s.select("customer_id", "week").unique().lazy()
        affinity, missions = (
            _rows_of(f, keys, ["customer_id", "week"]) for f in (affinity, missions)
        )
        numeric, self.customer_names, has_snapshot = customer_inputs(s, affinity, missions)
        day = basket["shop_date"].cast(pl.Int32).to_numpy()
        since = days_since_last_trip(self.index, ctx, hist_start)
        store_numeric, store_codes, store_is_new = store_inputs(basket, stores)
        return {
            "customer_numeric": numeric,
            "has_snapshot": has_snapshot,
            "customer_codes": basket.select(
                codes("cust_price_sensitivity", PRICE_SENSITIVITY_CODES),
                codes("cust_lifestage", LIFESTAGE_CODES),
            ).to_numpy(),
            "history_alpha": history_alpha(s["history_trips"].to_numpy()),
            "basket_day": day,
            "time_context": calendar_inputs(
                day, basket["shop_hour"].to_numpy(), s["week"].to_numpy(), since, self.calendar
            ),
            "store_numeric": store_numeric,
            "store_codes": store_codes,
            "store_is_new": store_is_new,
            "basket_labels": basket.select(
                codes("basket_type", BASKET_TYPES),
                codes("basket_dominant_mission", MISSIONS),
                codes("basket_price_sensitivity", PRICE_SENSITIVITY_CODES),
                codes("basket_size", SIZES),
            ).to_numpy(),
        }

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
        batch = to_batch(
            shelf
            | {
                "tokens": tokens,
                "item_mask": tokens != PAD,
                "item_prices": prices,
                **history,
                "customer_codes": self.customer_codes[idx],
                "customer_numeric": self.customer_numeric[idx],
                "history_alpha": self.history_alpha[idx],
                "calendar": self.time_context[idx],
                "store_codes": self.store_codes[idx],
                "store_numeric": self.store_numeric[idx],
                "store_is_new": self.store_is_new[idx],
                "basket_labels": self.basket_labels[idx],
            }
        )
        self.release()  # the batch is a copy: the pages it was gathered from can go
        return batch

    def release(self) -> None:
        """Drop the mapped pages read so far from this process's memory (none in memory)."""
        if self.mapped is not None:
            self.mapped.release()


def _rows_of(frame: pl.LazyFrame, keys: pl.LazyFrame, on: list[str]) -> pl.DataFrame:
    """The rows of ``frame`` (a chunk's weeks of an input) whose ``on`` is among ``keys``: what
    the chunk's left joins would match, read by the streaming engine so that a chunk spanning
    many weeks never holds those weeks' every row."""
    return frame.join(keys, on=on, how="semi").collect(engine="streaming")


def _targets(basket: pl.DataFrame, prices: pl.LazyFrame, vocab: ProductVocab) -> dict:
    """Target products (highest-priced first when truncated) with their T4 price inputs.
    Products outside the vocabulary (first sold in a test week) are no target any method can
    rank; they are counted in ``item_oov`` so that recall still counts them as missed."""
    items = (
        basket.with_row_index("i")
        .select("i", "week", "store_id", pl.col("products"))
        .explode("products")
    )
    cells = items.select(product_id="products", store_id="store_id", week="week").unique().lazy()
    prices = _rows_of(prices, cells, ["product_id", "store_id", "week"])
    items = (
        items.join(
            prices.select("product_id", "store_id", "week", *PRICE_COLUMNS),
            left_on=["products", "store_id", "week"],
            right_on=["product_id", "store_id", "week"],
            how="left",
        )
        .join(vocab.frame(), left_on="products", right_on="product_id", how="left")
        .sort(["i", "actual_price", "products"], descending=[False, True, False], nulls_last=True)
    )
    n = basket.height
    oov = np.bincount(items.filter(pl.col("token").is_null())["i"].to_numpy(), minlength=n)
    items = items.filter(pl.col("token").is_not_null())
    return {
        "item_oov": oov.astype(np.int64),
        "item_tokens": items["token"].to_numpy().astype(np.int32),
        "item_prices": items.select(pl.col(PRICE_COLUMNS).cast(pl.Float32).fill_null(0.0))
        .to_numpy()
        .reshape(-1, len(PRICE_COLUMNS)),
        "item_counts": np.bincount(items["i"].to_numpy(), minlength=n).astype(np.int64),
    }


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
