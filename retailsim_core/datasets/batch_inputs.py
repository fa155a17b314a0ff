"""The pieces of a world-model batch that do not depend on the basket's contents, shared by
``TrainingSet`` (baskets that happened) and the serving batcher (a customer walking into a store):
one implementation, so a served context and an evaluated basket get the same inputs.

- ``TripIndex``: the trip store as flat arrays, built once.
- ``history_inputs``: encoder trips, per-trip context and the repeat path's history features of
  each context, from its history bounds.
- ``calendar_inputs`` (T3), ``customer_inputs`` (T1 numeric), ``store_inputs`` (T5),
  ``history_alpha`` (T1 alpha).

Glossary: B contexts, H history trips the encoder reads, T trips in the store, I items of all
trips, U distinct products of a context's whole history, F history features.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from retailsim_core.calendar import LGSR, SourceCalendar
from retailsim_core.datasets.history_features import (
    BasketContext,
    TripArrays,
    history_features,
)
from retailsim_core.datasets.tokens import PAD, ProductVocab
from retailsim_core.ingest.lgsr import (
    BASKET_TYPE_CODES,
    MISSION_CODES,
    STORE_FORMAT_CODES,
    STORE_REGION_CODES,
)
from retailsim_core.storage.mapped import ChunkedArrays, MappedArrays

BASKET_TYPES = BASKET_TYPE_CODES  # T6 / trip-context code order (1-based; 0 = missing)
MISSIONS = MISSION_CODES
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


@dataclass(frozen=True)
class TripIndex:
    """Every trip of a ``TripStore`` as the model reads it (row order of the store)."""

    arrays: TripArrays  # tokens, offsets, day, store code, hour, weekend, mission codes
    customer: np.ndarray  # (T,) customer code (physical categorical)
    vocab_size: int  # V: the width of per-product inputs

    @classmethod
    def build(
        cls, trips: pl.DataFrame, vocab: ProductVocab, mapped: MappedArrays | None = None
    ) -> TripIndex:
        """Given ``mapped``, every array lives on its disk (its pages released with the sets'
        after each batch), so memory does not grow with the trips."""
        products = trips["products"]
        offsets = np.concatenate([[0], np.cumsum(products.list.len().to_numpy())])
        # A slice of trips at a time: the exploded product strings and their join for every trip
        # at once were a 1.5 GB transient at ``large`` (3 GB at ``xlarge``) beside the store.
        columns = ChunkedArrays(mapped)
        for lo in range(0, max(len(products), 1), TOKEN_CHUNK):
            columns.append({"trip_tokens": _tokens(products.slice(lo, TOKEN_CHUNK), vocab)})
        put = columns.put
        arrays = TripArrays(
            tokens=columns.finish()["trip_tokens"],
            offsets=put("trip_offsets", offsets.astype(np.int64)),
            day=put("trip_day", trips["shop_date"].cast(pl.Int32).to_numpy()),
            store=put(
                "trip_store",
                trips["store_id"].cast(pl.Categorical).to_physical().to_numpy().astype(np.int64),
            ),
            hour=put("trip_hour", trips["shop_hour"].fill_null(0).to_numpy().astype(np.int64)),
            weekend=put("trip_weekend", (trips["shop_date"].dt.weekday() >= 6).to_numpy()),
            mission=put(
                "trip_mission",
                trips.select(
                    codes("basket_type", BASKET_TYPES), codes("basket_dominant_mission", MISSIONS)
                ).to_numpy(),
            ),
        )
        customer = put(
            "trip_customer", trips["customer_id"].cast(pl.Categorical).to_physical().to_numpy()
        )
        return cls(arrays=arrays, customer=customer, vocab_size=vocab.size)


TOKEN_CHUNK = 500_000  # trips whose products are tokenised in one pass


def _tokens(products: pl.Series, vocab: ProductVocab) -> np.ndarray:
    """(I,) int32 token of every product of the lists, in order; [PAD] for one not in ``vocab``."""
    items = (
        products.to_frame("products")
        .explode("products")
        .join(
            vocab.frame(),
            left_on="products",
            right_on="product_id",
            how="left",
            maintain_order="left",
        )
    )
    return items["token"].fill_null(PAD).to_numpy().astype(np.int32)


def history_inputs(
    index: TripIndex, encoder_start: np.ndarray, ctx: BasketContext, width: int | None = None
) -> dict[str, np.ndarray]:
    """Encoder inputs (trips ``[encoder_start, ctx.end)``, padded to ``width`` or the longest)
    and the repeat path's (B, U) products and (B, U, F) features over the whole history
    ``[ctx.start, ctx.end)``; the explore path's (B, V, 2) seasonal lifts of every product on the
    basket's day (every customer's trips a year before, ``SeasonIndex``)."""
    a = index.arrays
    h_len = ctx.end - encoder_start
    H = width if width is not None else max(int(h_len.max()), 1)
    # ragged(arange(T), ...) without building arange(T): a served request reads a few trips
    col = np.arange(H, dtype=np.int64)
    trip_rows = np.where(
        col < np.minimum(h_len, H)[:, None], np.asarray(encoder_start, np.int64)[:, None] + col, -1
    )  # (B, H)
    valid = trip_rows >= 0  # (B, H)
    # Every product of the encoder's trips, flat: (B * H) bags, empty for padded trips.
    lengths = np.where(valid, a.offsets[trip_rows + 1] - a.offsets[np.maximum(trip_rows, 0)], 0)
    bag_starts = np.cumsum(lengths.reshape(-1)) - lengths.reshape(-1)
    flat_rows = np.repeat(np.maximum(trip_rows, 0).reshape(-1), lengths.reshape(-1))
    within = np.arange(lengths.sum()) - np.repeat(bag_starts, lengths.reshape(-1))
    context = np.zeros((len(h_len), H, 2), dtype=np.int64)
    context[valid] = a.mission[trip_rows[valid]]
    products, values = history_features(a, ctx)
    return {
        "history_items": a.tokens[a.offsets[flat_rows] + within].astype(np.int64),
        "history_offsets": bag_starts.astype(np.int64),
        "history_mask": valid,
        "history_context": context,
        # Days between each history trip and the basket: the encoder's time gaps (design §3.5).
        "history_days_before": np.where(
            valid, ctx.day[:, None] - a.day[np.maximum(trip_rows, 0)], 0
        ),
        "repeat_products": products,
        "repeat_values": values,
        "season": a.season.dense(ctx.day, index.vocab_size),
    }


def days_since_last_trip(index: TripIndex, ctx: BasketContext, encoder_start) -> np.ndarray:
    """Days from the customer's latest earlier trip to the basket; -1 without one."""
    last_day = np.where(ctx.end > 0, index.arrays.day[np.maximum(ctx.end - 1, 0)], -1)
    return np.where(ctx.end > encoder_start, ctx.day - last_day, -1)


def calendar_inputs(
    day: np.ndarray,
    hour: np.ndarray,
    week: np.ndarray,
    days_since_last: np.ndarray,
    calendar: SourceCalendar = LGSR,
) -> np.ndarray:
    """(B, 7) T3 of baskets on ``day`` (days since 1970-01-01): ISO week, weekday (LGSR's: 1 =
    Sunday), hour, public holiday (the source's country's), season, week / the source's weeks,
    days since the customer's last trip (-1 without one). Date arithmetic in numpy: a served
    request is one row, where a dataframe's per-call cost would be most of the work."""
    day = np.asarray(day, dtype=np.int64)
    monday0 = (day + 3) % 7  # 0 = Monday .. 6 = Sunday: 1970-01-01 was a Thursday
    thursday = (day - monday0 + 3).astype("datetime64[D]")  # its ISO week's Thursday
    iso_week = (thursday - thursday.astype("datetime64[Y]")).astype(np.int64) // 7 + 1
    month = day.astype("datetime64[D]").astype("datetime64[M]").astype(np.int64) % 12 + 1
    return np.stack(
        [
            iso_week,
            (monday0 + 1) % 7 + 1,
            hour,
            np.isin(day, calendar.holiday_days),
            (month % 12) // 3,  # calendar.season_of, vectorised
            np.asarray(week) / calendar.n_weeks,
            days_since_last,
        ],
        axis=1,
    ).astype(np.float32)


def history_alpha(history_trips: np.ndarray) -> np.ndarray:
    """Design §4.2.1: alpha = 0.8 below 5 trips, else max(0.2, 1 / ln(trips))."""
    return np.where(
        history_trips < 5, 0.8, np.maximum(0.2, 1.0 / np.log(np.maximum(history_trips, 2)))
    ).astype(np.float32)


def customer_inputs(
    keys: pl.DataFrame, affinity: pl.DataFrame, missions: pl.DataFrame
) -> tuple[np.ndarray, tuple[str, ...], np.ndarray]:
    """T1 numeric rows of ``keys`` (customer_id, week): the week's affinity and mission snapshot
    (0 where the customer has none); their column names; whether a snapshot exists."""
    key = ["customer_id", "week"]
    keys = keys.select(key)
    aff = keys.join(
        affinity.select(*key, *AFFINITY_COLUMNS), on=key, how="left", maintain_order="left"
    )
    mis = keys.join(
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
    numeric = aff.drop(key).hstack(mis.drop(key))  # equal heights: both keyed on keys
    values = numeric.select(pl.all().cast(pl.Float32).fill_null(0.0).fill_nan(0.0)).to_numpy()
    return values, tuple(numeric.columns), aff["loyalty_score"].is_not_null().to_numpy()


def store_inputs(
    basket: pl.DataFrame, stores: pl.DataFrame
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """T5 of each row of ``basket`` (store_id, store_format, store_region, week): the store's
    week row; a store first seen that week uses its format x region fallback row (design §4.7.5
    case 4) and store id 0. -> (B, 4) numeric, (B, 3) codes, (B,) is_new."""
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
        # A source without formats or regions (The Complete Journey) has one null x null row.
        .join(fallback, on=["store_format", "store_region", "week"], how="left", nulls_equal=True)
        .sort("i")
    )
    is_new = st[STORE_COLUMNS[0]].is_null()
    numeric = st.select(
        pl.coalesce(c, f"fb_{c}").cast(pl.Float32).fill_null(0.0) for c in STORE_COLUMNS
    ).to_numpy()
    store_codes = st.select(
        codes("store_format", STORE_FORMAT_CODES),
        codes("store_region", STORE_REGION_CODES),
        pl.when(~is_new)
        .then(pl.col("store_id").str.slice(5).cast(pl.Int32, strict=False))
        .otherwise(0)
        .fill_null(0),
    ).to_numpy()
    return numeric, store_codes, is_new.to_numpy()
