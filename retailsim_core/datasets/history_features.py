"""Per (customer, product) purchase statistics of a basket's history, for the repeat path.

For a basket of week W, every statistic reads the customer's trips before W only (the trip
store slice ``[full_hist_start, hist_end)``, never capped: a customer's whole history, every
product of every trip). The statistics are those that make personal frequency, TIFU-KNN and
ReCANet strong, computed once per batch, vectorised over (sample, trip, product) entries:
counts and shares, decays in days and in trips, recency against the customer's own
inter-purchase interval for the product, counts at the basket's store, on trips of the same
weekday type and hour, in the latest trips, and counts among trips of each mission type and
focus (the conditional mode reads the one of the given mission), and the time of year: the
customer's purchases a year or two before, and every customer's demand for the product around the
same week a year before against its year and its preceding weeks (``SeasonIndex``).

Glossary: B baskets, U distinct history products of a basket (padded with [PAD]), F features,
E history entries (sample, trip, product) of a batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from retailsim_core.datasets.tokens import PAD

_DECAY_DAYS = (14.0, 56.0, 182.0)
_DECAY_TRIPS = (0.9, 0.97)
N_FOCI, N_TYPES = 4, 3  # mission focus codes 1..4, mission type codes 1..3 (trip_context)
HISTORY_FEATURES = (
    "log_count",
    "share_of_trips",
    *[f"decay_{int(d)}d" for d in _DECAY_DAYS],
    *[f"trip_decay_{r}" for r in _DECAY_TRIPS],
    "log_days_since_last",
    "interval_ratio",
    "log_mean_interval",
    "log_days_since_first",
    "log_count_at_store",
    "share_at_store",
    "log_count_same_weekpart",
    "log_count_same_hour",
    "in_last_trip",
    "in_last_3_trips",
    "share_of_last_10_trips",
    "in_last_trip_at_store",
    "store_trip_decay",
    *[f"log_count_focus_{i}" for i in range(1, N_FOCI + 1)],
    *[f"log_count_type_{i}" for i in range(1, N_TYPES + 1)],
    "log_history_trips",
    "log_days_since_last_trip",
    "log_count_same_season",
    "season_lift",
    "season_trend",
)
FOCUS_COLUMNS = [HISTORY_FEATURES.index(f"log_count_focus_{i}") for i in range(1, N_FOCI + 1)]
TYPE_COLUMNS = [HISTORY_FEATURES.index(f"log_count_type_{i}") for i in range(1, N_TYPES + 1)]
_NEVER_DAYS = 1e4  # "days since" of something that never happened
_SEASON_AGES = (364, 728)  # days: the same weekday a year and two years before
_SEASON_HALF_WIDTH = 21  # days either side of those ages count as "the same time of year"
_YEAR_WEEKS = 52
_SEASON_WEEKS = 2  # weeks either side of the week a year before: the season's window
_LEAD_WEEKS = 8  # the weeks before that window: where the season was heading from
SEASON_TRIPS = 1_000_000  # trips a slice of ``SeasonIndex.build`` counts at once
_SEASON_PRIOR = 5.0  # pseudo-trips: a product bought a handful of times has a lift near 0


@dataclass(frozen=True)
class TripArrays:
    """The trip store as flat arrays (row order of ``TripStore.trips``)."""

    tokens: (
        np.ndarray
    )  # (I,) product tokens of every trip (each product once per trip), [PAD] unknown
    offsets: np.ndarray  # (T + 1,) trip t's tokens are tokens[offsets[t]:offsets[t + 1]]
    day: np.ndarray  # (T,) days since epoch
    store: np.ndarray  # (T,) store code
    hour: np.ndarray  # (T,) shop hour
    weekend: np.ndarray  # (T,) bool, Saturday or Sunday
    mission: np.ndarray  # (T, 2) mission type and focus codes (1-based, 0 unknown)

    @cached_property
    def first_day(self) -> int:
        """The store's first trip day: where a window into the past stops meaning anything."""
        return int(self.day.min()) if len(self.day) else 0

    @cached_property
    def season(self) -> SeasonIndex:
        """Every customer's weekly demand per product, built once per trip store."""
        return SeasonIndex.build(self)


@dataclass(frozen=True)
class SeasonIndex:
    """Cumulative counts, week by week (days since epoch // 7), of the trips that bought each
    product and of all trips in the store (every customer). A basket's seasonal features read
    only the weeks 78 to 27 before its own (the year centred on the week a year before), so the
    store's later trips, the basket's week included, never reach them."""

    first_week: int
    product_trips: np.ndarray  # (W + 1, V) trips that bought each product, cumulative by week
    trips: np.ndarray  # (W + 1,) trips, cumulative by week
    # (V, 2) float32 ``dense`` rows by week, filled on first use: the features depend on the
    # basket's week only, and a batch's baskets share a few weeks (at 61,445 products this
    # saved about 4% of a short training run).
    _by_week: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def build(cls, trips: TripArrays) -> SeasonIndex:
        week = trips.day.astype(np.int64) // 7
        first = trips.first_day // 7
        n_weeks = int(week.max()) - first + 1 if len(week) else 1
        v = int(trips.tokens.max()) + 1 if len(trips.tokens) else 1
        counts = np.zeros(n_weeks * v, dtype=np.int64)
        # A slice of trips at a time: every item's week at once was 16 bytes an item (0.7 GB at
        # ``xlarge``) beside the store.
        for lo in range(0, len(week), SEASON_TRIPS):
            hi = min(lo + SEASON_TRIPS, len(week))
            a, b = trips.offsets[lo], trips.offsets[hi]
            tokens = np.asarray(trips.tokens[a:b])
            item_week = np.repeat(week[lo:hi] - first, np.diff(trips.offsets[lo : hi + 1]))
            keep = tokens != PAD
            flat = item_week[keep] * v + tokens[keep].astype(np.int64)
            counts += np.bincount(flat, minlength=n_weeks * v)
        counts = counts.reshape(n_weeks, v)
        per_week = np.bincount(week - first, minlength=n_weeks)
        zero_row = np.zeros((1, v), dtype=np.int64)
        return cls(
            first_week=first,
            product_trips=np.concatenate([zero_row, counts.cumsum(0)]).astype(np.int32),
            trips=np.concatenate([[0], per_week.cumsum()]).astype(np.int64),
        )

    def _window(self, week: np.ndarray, product: np.ndarray | None, lo: int, hi: int):
        """Trips buying ``product`` ((Q,), or every product: (Q, V)) and all trips ((Q,) or
        (Q, 1)) in weeks [week + lo, week + hi), clipped to the store's weeks."""
        n = len(self.trips) - 1
        a = np.clip(week + lo - self.first_week, 0, n)
        b = np.clip(week + hi - self.first_week, 0, n)
        trips = (self.trips[b] - self.trips[a]).astype(np.float64)
        if product is None:
            return (self.product_trips[b] - self.product_trips[a]).astype(np.float64), trips[
                :, None
            ]
        bought = self.product_trips[b, product] - self.product_trips[a, product]
        return bought.astype(np.float64), trips

    def _lifts(self, day: np.ndarray, product: np.ndarray | None):
        week = day.astype(np.int64) // 7
        centre = -_YEAR_WEEKS
        n_win, t_win = self._window(
            week, product, centre - _SEASON_WEEKS, centre + _SEASON_WEEKS + 1
        )
        n_year, t_year = self._window(week, product, centre - 26, centre + 26)
        lead = (centre - _SEASON_WEEKS - _LEAD_WEEKS, centre - _SEASON_WEEKS)
        n_lead, t_lead = self._window(week, product, *lead)

        def lift(n_ref, t_ref, first_read):
            expected = n_ref * t_win / np.maximum(t_ref, 1.0)
            out = np.log((n_win + _SEASON_PRIOR) / (expected + _SEASON_PRIOR))
            # A window that starts before the store's first week compares a few weeks at the
            # data's edge with an empty reference: 0 (no season known), as for a store with no
            # year before at all (D112).
            covered = week + first_read >= self.first_week
            return out * (covered if out.ndim == 1 else covered[:, None])

        season_start = centre - _SEASON_WEEKS
        return lift(n_year, t_year, season_start), lift(n_lead, t_lead, lead[0])

    def lifts(self, day: np.ndarray, product: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(Q,) log lift of each product's share of trips in the weeks around the same week a
        year before over its share in the surrounding year, and over its share in the weeks
        just before that window (which way the season was moving); 0 without data."""
        inside = product < self.product_trips.shape[1]
        lift, trend = self._lifts(day, np.where(inside, product, 0))
        return lift * inside, trend * inside

    def dense(self, day: np.ndarray, size: int) -> np.ndarray:
        """(B, V, 2) float32: ``lifts`` of every token 0..V-1 on each basket's day (0 for tokens
        the store never sold: [PAD], the special tokens)."""
        weeks, inverse = np.unique(day.astype(np.int64) // 7, return_inverse=True)
        new = [w for w in weeks.tolist() if w not in self._by_week]
        if new:
            lift, trend = self._lifts(np.array(new, np.int64) * 7, None)  # (U, V') each
            for i, w in enumerate(new):
                self._by_week[w] = np.stack([lift[i], trend[i]], -1).astype(np.float32)
        rows = np.stack([self._by_week[w] for w in weeks.tolist()])  # (U, V', 2)
        out = np.zeros((len(day), size, 2), dtype=np.float32)
        width = min(size, rows.shape[1])
        out[:, :width] = rows[inverse.reshape(-1), :width]
        return out


@dataclass(frozen=True)
class BasketContext:
    """What is known of each basket when it is predicted: its customer's history bounds and the
    trip's store, date and hour (never its products, size or labels)."""

    start: np.ndarray  # (B,) first history trip (the customer's first trip)
    end: np.ndarray  # (B,) one past the last trip before the basket's week
    day: np.ndarray  # (B,)
    store: np.ndarray  # (B,)
    hour: np.ndarray  # (B,)
    weekend: np.ndarray  # (B,) bool


def _same_season(trips: TripArrays, ctx: BasketContext, row, age, key_row, total) -> np.ndarray:
    """(Q,) the customer's trips buying the product at the same time of year (``_SEASON_AGES``
    days before, +- ``_SEASON_HALF_WIDTH``), a mean over the years whose whole window lies within
    the store's data; 0 where none does. A window cut by the data's start reads its first weeks
    as the season: on one year of data every training week had 0 and the year's last weeks
    counts from its first ones (D134); the mean keeps a second year from doubling the scale."""
    covered = np.stack(
        [ctx.day - a - _SEASON_HALF_WIDTH >= trips.first_day for a in _SEASON_AGES], axis=1
    )  # (B, A)
    inside = np.zeros(len(age), dtype=bool)
    for i, a in enumerate(_SEASON_AGES):  # the windows are disjoint: a trip is in one at most
        inside |= (np.abs(age - a) <= _SEASON_HALF_WIDTH) & covered[row, i]
    return total(inside) / np.maximum(covered.sum(1), 1)[key_row]


def _entries(trips: TripArrays, ctx: BasketContext):
    """(E,) sample row, trips-ago rank, trip row, token and store-trips-ago rank (-1 for a trip at
    another store) of every history product entry; and the (row, trip) pairs."""
    n = ctx.end - ctx.start
    row = np.repeat(np.arange(len(n)), n)
    within = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
    trip = np.repeat(ctx.start, n) + within
    ago = np.repeat(n, n) - 1 - within  # 0 = latest trip
    here = trips.store[trip] == ctx.store[row]
    # among the row's trips at the basket's store, 0 = the latest: later store trips of the row
    later = np.bincount(row, weights=here, minlength=len(n))[row] - _cumsum_within(here, n)
    store_ago = np.where(here, later, -1)
    lengths = trips.offsets[trip + 1] - trips.offsets[trip]
    expand = np.repeat(np.arange(len(trip)), lengths)
    item = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    tokens = trips.tokens[np.repeat(trips.offsets[trip], lengths) + item]
    keep = tokens != PAD
    return (
        row[expand][keep],
        ago[expand][keep],
        trip[expand][keep],
        tokens[keep],
        store_ago[expand][keep],
        (row, trip),
    )


def _cumsum_within(flags: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Inclusive running count of ``flags`` within each row's run of ``n`` entries."""
    total = np.cumsum(flags.astype(np.int64))
    before = (
        np.repeat(total[np.cumsum(n) - n - 1] * (np.cumsum(n) - n > 0), n) if len(flags) else total
    )
    return total - before


def history_features(trips: TripArrays, ctx: BasketContext) -> tuple[np.ndarray, np.ndarray]:
    """(B, U) product tokens ([PAD]-padded) and (B, U, F) float32 features of every distinct
    product in each basket's history (``HISTORY_FEATURES`` order)."""
    b = len(ctx.start)
    row, ago, trip, token, store_ago, (trip_row, trip_id) = _entries(trips, ctx)
    span = int(token.max()) + 1 if len(token) else 1
    keys, inverse = np.unique(row.astype(np.int64) * span + token, return_inverse=True)
    q = len(keys)
    key_row, product = keys // span, keys % span

    def total(weights) -> np.ndarray:
        return np.bincount(inverse, weights=weights, minlength=q)

    age = (ctx.day[row] - trips.day[trip]).astype(np.float64)  # days before
    n_trips = np.maximum(ctx.end - ctx.start, 0)
    count = total(None)
    last = np.full(q, _NEVER_DAYS)
    np.minimum.at(last, inverse, age)
    first = np.zeros(q)
    np.maximum.at(first, inverse, age)
    repeated = count > 1
    mean_interval = np.where(repeated, (first - last) / np.maximum(count - 1, 1), 0.0)
    # Trips at the basket's store, per sample, for the store share.
    at_store_trip = trips.store[trip_id] == ctx.store[trip_row]
    store_trips = np.bincount(trip_row, weights=at_store_trip, minlength=b)
    at_store = total(trips.store[trip] == ctx.store[row])
    mission = trips.mission[trip]
    same_season = _same_season(trips, ctx, row, age, key_row, total)
    season_lift, season_trend = trips.season.lifts(ctx.day[key_row], product)
    latest_day = np.where(n_trips > 0, trips.day[np.maximum(ctx.end - 1, 0)], ctx.day - _NEVER_DAYS)
    columns = [
        np.log1p(count),
        count / np.maximum(n_trips[key_row], 1),
        *[total(np.exp(-age / tau)) for tau in _DECAY_DAYS],
        *[total(r ** ago.astype(np.float64)) for r in _DECAY_TRIPS],
        np.log1p(last),
        np.where(repeated, np.log1p(last) - np.log1p(mean_interval), 0.0),
        np.log1p(mean_interval),
        np.log1p(first),
        np.log1p(at_store),
        at_store / np.maximum(store_trips[key_row], 1),
        np.log1p(total(trips.weekend[trip] == ctx.weekend[row])),
        np.log1p(total(np.abs(trips.hour[trip].astype(np.int64) - ctx.hour[row]) <= 2)),
        total(ago == 0),
        total(ago < 3),
        total(ago < 10) / np.minimum(np.maximum(n_trips[key_row], 1), 10),
        total(store_ago == 0),
        total(np.where(store_ago >= 0, 0.8 ** np.maximum(store_ago, 0), 0.0)),
        *[np.log1p(total(mission[:, 1] == code)) for code in range(1, N_FOCI + 1)],
        *[np.log1p(total(mission[:, 0] == code)) for code in range(1, N_TYPES + 1)],
        np.log1p(n_trips)[key_row],
        np.log1p(ctx.day - latest_day)[key_row],
        np.log1p(same_season),
        season_lift,
        season_trend,
    ]
    feats = np.stack(columns, axis=1).astype(np.float32)  # (Q, F)
    per_row = np.bincount(key_row, minlength=b)
    slot = np.arange(q) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    u = max(int(per_row.max(initial=0)), 1)
    products = np.full((b, u), PAD, dtype=np.int64)
    products[key_row, slot] = product
    values = np.zeros((b, u, len(HISTORY_FEATURES)), dtype=np.float32)
    values[key_row, slot] = feats
    return products, values
