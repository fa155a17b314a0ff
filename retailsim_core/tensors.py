"""T1–T6 batches for the world model (spec §4.1–4.8), gathered from row-aligned arrays.

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
import torch

from retailsim_core.calendar import N_WEEKS, uk_bank_holidays
from retailsim_core.history_features import BasketContext, TripArrays, history_features
from retailsim_core.lgsr import (
    LIFESTAGE_CODES,
    PRICE_SENSITIVITY_CODES,
    STORE_FORMAT_CODES,
    STORE_REGION_CODES,
)
from retailsim_core.shelf import ShelfPrices
from retailsim_core.tokens import PAD, ProductVocab
from retailsim_core.trips import TripStore

BASKET_TYPES = ("Top Up", "Small Shop", "Full Shop", "XX")
MISSIONS = ("Fresh", "Grocery", "Mixed", "Nonfood", "XX")
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
AFFINITY_COLUMNS = (
    "loyalty_score",
    "switching_rate",
    "region_diversity",
    "total_stores_visited",
    "visit_concentration",
    "spatial_range",
    "n_visits",
    "weeks_since_last_visit",
)
MISSION_COLUMNS = (
    "mission_type_entropy",
    "focus_entropy",
    "mean_price_sensitivity",
    "sensitivity_volatility",
    "mean_basket_size",
    "basket_size_variance",
    "mission_consistency",
)
STORE_COLUMNS = ("traffic", "size_proxy", "regional_competition", "age")
HOLIDAYS = {d for y in range(2005, 2010) for d in uk_bank_holidays(y)}


@dataclass(frozen=True)
class TensorConfig:
    max_items: int = 50  # basket products (spec §4.7.5 case 5), [EOS] extra
    max_history_trips: int = 100  # most recent trips the encoder reads (H); every trip of every
    # product enters the history features


def codes(col: str, vocab: tuple[str, ...]) -> pl.Expr:
    """1-based code of a categorical column; 0 when missing or unknown."""
    return pl.col(col).replace_strict(
        {v: i + 1 for i, v in enumerate(vocab)}, default=0, return_dtype=pl.Int16
    )


def ragged(
    flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray, width: int, fill=0
) -> np.ndarray:
    """Rows ``flat[starts[i] : starts[i] + min(lengths[i], width)]`` padded to ``width``."""
    lengths = np.minimum(lengths, width)
    out = np.full((len(starts), width) + flat.shape[1:], fill, dtype=flat.dtype)
    rows = np.repeat(np.arange(len(starts)), lengths)
    cols = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    out[rows, cols] = flat[np.repeat(starts, lengths) + cols]
    return out


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
    ):
        self.cfg, self.vocab, self.n, self.shelf = cfg, vocab, samples.height, shelf
        trips = store.trips.with_row_index("row")
        # History store arrays (all trips): item tokens, days, store, hour, mission codes.
        items = (
            trips.select("row", pl.col("products"))
            .explode("products")
            .join(
                vocab.frame(),
                left_on="products",
                right_on="product_id",
                how="left",
                maintain_order="left",
            )
        )
        self.trip_tokens = items["token"].fill_null(PAD).to_numpy().astype(np.int32)
        self.trip_offsets = np.concatenate(
            [[0], np.cumsum(trips["products"].list.len().to_numpy())]
        ).astype(np.int64)
        self.trip_day = (trips["shop_date"].cast(pl.Int32)).to_numpy()
        self.trip_customer = trips["customer_id"].cast(pl.Categorical).to_physical().to_numpy()
        self.trip_context = trips.select(
            codes("basket_type", BASKET_TYPES), codes("basket_dominant_mission", MISSIONS)
        ).to_numpy()
        self.trips = TripArrays(
            tokens=self.trip_tokens,
            offsets=self.trip_offsets,
            day=self.trip_day,
            store=trips["store_id"].cast(pl.Categorical).to_physical().to_numpy().astype(np.int64),
            hour=trips["shop_hour"].fill_null(0).to_numpy().astype(np.int64),
            weekend=(trips["shop_date"].dt.weekday() >= 6).to_numpy(),
            mission=self.trip_context,
        )

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
        key = ["customer_id", "week"]
        aff = s.select(key).join(
            affinity.select(*key, *AFFINITY_COLUMNS), on=key, how="left", maintain_order="left"
        )
        mis = s.select(key).join(
            missions.select(
                *key,
                *MISSION_COLUMNS,
                pl.col("mission_type_dist").struct.unnest(),
                pl.col("mission_focus_dist").struct.unnest(),
            ),
            on=key,
            how="left",
            maintain_order="left",
        )
        numeric = aff.drop(key).hstack(mis.drop(key))  # equal heights: both keyed on s
        self.t1_numeric = numeric.select(
            pl.all().cast(pl.Float32).fill_null(0.0).fill_nan(0.0)
        ).to_numpy()
        self.t1_names = tuple(numeric.columns)
        self.t1_has_snapshot = aff["loyalty_score"].is_not_null().to_numpy()
        self.t1_codes = basket.select(
            codes("cust_price_sensitivity", PRICE_SENSITIVITY_CODES),
            codes("cust_lifestage", LIFESTAGE_CODES),
        ).to_numpy()
        trips_n = s["history_trips"].to_numpy()
        # Spec §4.2.1: alpha = 0.8 below 5 trips, else max(0.2, 1 / ln(trips)).
        self.t1_alpha = np.where(
            trips_n < 5, 0.8, np.maximum(0.2, 1.0 / np.log(np.maximum(trips_n, 2)))
        ).astype(np.float32)
        date = basket["shop_date"]
        self.basket_day = date.cast(pl.Int32).to_numpy()
        last_day = np.where(self.hist_end > 0, self.trip_day[np.maximum(self.hist_end - 1, 0)], -1)
        same_customer = self.hist_end > self.hist_start
        self.t3 = np.stack(
            [
                date.dt.week().to_numpy(),
                (date.dt.weekday() % 7 + 1).to_numpy(),
                basket["shop_hour"].to_numpy(),
                date.is_in(sorted(HOLIDAYS)).to_numpy(),
                ((date.dt.month() % 12) // 3).to_numpy(),  # calendar.season_of, vectorised
                s["week"].to_numpy() / N_WEEKS,
                np.where(same_customer, date.cast(pl.Int32).to_numpy() - last_day, -1),
            ],
            axis=1,
        ).astype(np.float32)
        # T5: the store's week-W row; a store first seen in week W uses its format x region
        # fallback row (spec §4.7.5 case 4) and store id 0.
        known = stores.filter(pl.col("store_id").is_not_null()).select(
            "store_id", "week", *STORE_COLUMNS
        )
        fallback = stores.filter(pl.col("store_id").is_null()).select(
            "store_format",
            "store_region",
            "week",
            *[pl.col(c).alias(f"fb_{c}") for c in STORE_COLUMNS],
        )
        st = (
            basket.select("store_id", "store_format", "store_region", "week")
            .with_row_index("i")
            .join(known, on=["store_id", "week"], how="left")
            .join(fallback, on=["store_format", "store_region", "week"], how="left")
            .sort("i")
        )
        is_new = st[STORE_COLUMNS[0]].is_null()
        self.t5_numeric = st.select(
            pl.coalesce(c, f"fb_{c}").cast(pl.Float32).fill_null(0.0) for c in STORE_COLUMNS
        ).to_numpy()
        self.t5_codes = st.select(
            codes("store_format", STORE_FORMAT_CODES),
            codes("store_region", STORE_REGION_CODES),
            pl.when(~is_new)
            .then(pl.col("store_id").str.slice(5).cast(pl.Int32, strict=False))
            .otherwise(0)
            .fill_null(0),
        ).to_numpy()
        self.t5_is_new = is_new.to_numpy()
        self.t6 = basket.select(
            codes("basket_type", BASKET_TYPES),
            codes("basket_dominant_mission", MISSIONS),
            codes("basket_price_sensitivity", PRICE_SENSITIVITY_CODES),
            codes("basket_size", SIZES),
        ).to_numpy()

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, indices) -> dict[str, torch.Tensor]:
        """A whole batch: ``indices`` is the list of sample rows (use ``batch_size=None``)."""
        idx = np.asarray(indices, dtype=np.int64)
        cfg, eos = self.cfg, self.vocab.eos
        n_items = np.minimum(self.item_counts[idx], cfg.max_items)
        L = int(n_items.max()) + 1
        tokens = ragged(self.item_tokens, self.item_starts[idx], n_items, L)
        tokens[np.arange(len(idx)), n_items] = eos  # [EOS] right after the last item
        prices = ragged(self.item_prices, self.item_starts[idx], n_items, L)  # (B, L, 8)
        h_len = self.hist_end[idx] - self.hist_start[idx]
        H = max(int(h_len.max()), 1)
        trip_rows = ragged(
            np.arange(len(self.trip_day), dtype=np.int64), self.hist_start[idx], h_len, H, fill=-1
        )
        valid = trip_rows >= 0  # (B, H)
        # Every product of the encoder's trips, flat: (B * H) bags, empty for padded trips.
        lengths = np.where(
            valid, self.trip_offsets[trip_rows + 1] - self.trip_offsets[np.maximum(trip_rows, 0)], 0
        )
        bag_starts = np.cumsum(lengths.reshape(-1)) - lengths.reshape(-1)
        flat_rows = np.repeat(np.maximum(trip_rows, 0).reshape(-1), lengths.reshape(-1))
        within = np.arange(lengths.sum()) - np.repeat(bag_starts, lengths.reshape(-1))
        history_items = self.trip_tokens[self.trip_offsets[flat_rows] + within]
        hist_context = np.zeros((len(idx), H, 2), dtype=np.int64)
        hist_context[valid] = self.trip_context[trip_rows[valid]]
        ctx = self.basket_context
        products, values = history_features(
            self.trips,
            BasketContext(
                start=ctx.start[idx],
                end=ctx.end[idx],
                day=ctx.day[idx],
                store=ctx.store[idx],
                hour=ctx.hour[idx],
                weekend=ctx.weekend[idx],
            ),
        )
        extra = (
            {"shelf": torch.from_numpy(self.shelf.dense(self.shelf_rows[idx]))}
            if self.shelf is not None
            else {}
        )
        return extra | {
            "tokens": torch.from_numpy(tokens),
            "item_mask": torch.from_numpy(tokens != PAD),
            "t4_prices": torch.from_numpy(prices),
            "history_items": torch.from_numpy(history_items.astype(np.int64)),
            "history_offsets": torch.from_numpy(bag_starts.astype(np.int64)),
            "history_mask": torch.from_numpy(valid),
            "history_context": torch.from_numpy(hist_context),
            # Days between each history trip and the basket: the encoder's time gaps (spec §3.5).
            "history_days_before": torch.from_numpy(
                np.where(
                    valid, self.basket_day[idx, None] - self.trip_day[np.maximum(trip_rows, 0)], 0
                )
            ),
            "repeat_products": torch.from_numpy(products),
            "repeat_values": torch.from_numpy(values),
            "t1_codes": torch.from_numpy(self.t1_codes[idx].astype(np.int64)),
            "t1_numeric": torch.from_numpy(self.t1_numeric[idx]),
            "t1_alpha": torch.from_numpy(self.t1_alpha[idx]),
            "t3": torch.from_numpy(self.t3[idx]),
            "t5_codes": torch.from_numpy(self.t5_codes[idx].astype(np.int64)),
            "t5_numeric": torch.from_numpy(self.t5_numeric[idx]),
            "t5_is_new": torch.from_numpy(self.t5_is_new[idx]),
            "t6": torch.from_numpy(self.t6[idx].astype(np.int64)),
        }


class LengthBucketSampler:
    """Batches of sample rows of one history bucket each (spec §5.6.0), shuffled within buckets
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
