"""Inputs the world model does not read, for the repeat-ranker benchmark (D74): the customer's
purchases at category level, every customer's purchases of the product, what the basket's store
sold in the weeks before, what tends to follow the customer's last trip and what the customers
most like the customer bought.

For a basket of week W every function reads trips of weeks < W only (product statistics,
transition counts and neighbour pools: trips before the basket set's first week).
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import polars as pl
import scipy.sparse as sp

from retailsim_core.baselines import neighbour_baselines as nb
from retailsim_core.baselines.counting import trip_matrix
from retailsim_core.datasets.history_features import TripArrays
from retailsim_core.datasets.tokens import PAD
from retailsim_core.graph.graph_edges import HIERARCHY_LEVELS
from retailsim_core.next_basket.tuning import tifu_scores, upcf_scores
from retailsim_core.storage.warehouse import Warehouse

LEVELS = ("prod_code_40", "prod_code_30")  # sub-commodity, commodity
LEVEL_FEATURES = (
    "log_count",
    "trip_decay_0.97",
    "trip_decay_0.9",
    "decay_56d",
    "log_days_since_last",
    "interval_ratio",
    "log_mean_interval",
    "share_at_store",
    "in_last_trip",
)
PRODUCT_FEATURES = ("p_log_trips", "p_log_buyers", "p_repeat_share", "p_log_recent")
STORE_FEATURES = ("s_log_recent", "s_share_recent", "s_log_last_week", "s_sold_recent", "g_trend")
TRANSITION_FEATURES = ("t_lift_last", "t_lift_last_other", "t_lift_last3_other", "t_prob_other")
NEIGHBOUR_FEATURES = ("n_tifu", "n_upcf")
RECENT_WEEKS = 4  # the store's recent weeks
TREND_WEEKS = 8  # the weeks before those, the product's level the trend is taken against
_CHUNK = 2_000  # baskets per dense (B, V) block of transition scores


def _flat(arrays: TripArrays, trip_week: np.ndarray):
    """(I,) trip row, week, store and token of every known product entry."""
    trip = np.repeat(np.arange(len(arrays.day)), np.diff(arrays.offsets))
    keep = arrays.tokens != PAD
    trip = trip[keep]
    return trip, trip_week[trip].astype(np.int64), arrays.store[trip], arrays.tokens[keep]


def _counter(*codes: np.ndarray):
    """A lookup (arrays of codes) -> how many times each tuple of codes occurs in ``codes``."""
    spans = [int(c.max()) + 2 if len(c) else 1 for c in codes]

    def key(*cols):
        out = np.zeros(len(cols[0]), dtype=np.int64)
        for col, span in zip(cols, spans, strict=True):
            # out of range (a week before the first) never matches a real key
            out = out * span + np.where((col >= 0) & (col < span - 1), col, span - 1)
        return out

    keys, counts = np.unique(key(*codes), return_counts=True)

    def lookup(*cols) -> np.ndarray:
        q = key(*cols)
        if not len(keys):
            return np.zeros(len(q), dtype=np.int64)
        i = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
        return np.where(keys[i] == q, counts[i], 0)

    return lookup


def store_recent_features(
    arrays: TripArrays,
    trip_week: np.ndarray,  # (T,) shop week of every trip
    basket_store: np.ndarray,  # (N,) per (basket, product) row: the basket's store code
    basket_week: np.ndarray,  # (N,) the basket's week
    token: np.ndarray,  # (N,) the product
) -> dict[str, np.ndarray]:
    """Every customer's trips of the ``RECENT_WEEKS`` weeks before the basket's at its store
    that bought the product (count, share of the store's trips, last week alone, any), and the
    product's trend over all stores (recent weekly trips against the ``TREND_WEEKS`` before)."""
    _, week, store, tok = _flat(arrays, trip_week)
    at_store = _counter(store, week, tok)
    store_trips = _counter(arrays.store, trip_week.astype(np.int64))
    everywhere = _counter(week, tok)
    recent, trips, last, level, before = (np.zeros(len(token)) for _ in range(5))
    for lag in range(1, RECENT_WEEKS + TREND_WEEKS + 1):
        w = basket_week - lag
        if lag <= RECENT_WEEKS:
            n = at_store(basket_store, w, token)
            recent += n
            trips += store_trips(basket_store, w)
            last += n if lag == 1 else 0
            level += everywhere(w, token)
        else:
            before += everywhere(w, token)
    return {
        "s_log_recent": np.log1p(recent),
        "s_share_recent": recent / np.maximum(trips, 1),
        "s_log_last_week": np.log1p(last),
        "s_sold_recent": (recent > 0).astype(np.float64),
        "g_trend": np.log1p(level / RECENT_WEEKS) - np.log1p(before / TREND_WEEKS),
    }


def transition_counts(
    trips: sp.csr_matrix,  # (T, V) 0/1 products of every trip (``baselines.trip_matrix``)
    trip_week: np.ndarray,
    customer: np.ndarray,  # (T,) customer code of every trip (trips in time order per customer)
    before_week: int,
) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray, np.ndarray]:
    """Over consecutive trips of one customer whose later trip is of a week < ``before_week``:
    C[q, p] pairs with q in the earlier trip and p in the later, the earlier trips holding each
    q, and each p's share of later trips; with ``trips`` less its [PAD] (unknown product)
    column, the incidence ``transition_features`` reads."""
    known = np.ones(trips.shape[1], dtype=np.float32)  # float32: the lifts D74 reports, bit for bit
    known[PAD] = 0.0
    incidence = (trips @ sp.diags(known)).tocsr()
    incidence.eliminate_zeros()
    earlier = np.nonzero(
        (customer[:-1] == customer[1:]) & (trip_week[1:].astype(np.int64) < before_week)
    )[0]
    first, second = incidence[earlier], incidence[earlier + 1]
    pairs = (first.T @ second).toarray()  # (V, V)
    held = np.asarray(first.sum(axis=0)).ravel()
    share = np.asarray(second.sum(axis=0)).ravel() / max(len(earlier), 1)
    return incidence, pairs, held, share


def transition_features(
    incidence: sp.csr_matrix,
    pairs: np.ndarray,
    held: np.ndarray,
    share: np.ndarray,
    start: np.ndarray,  # (B,) each basket's first history trip
    end: np.ndarray,  # (B,) one past its last history trip (weeks < W)
    row: np.ndarray,  # (N,) basket of each (basket, product) row
    token: np.ndarray,  # (N,)
) -> dict[str, np.ndarray]:
    """How often the product followed the products of the customer's last trip (last 3 trips)
    in other trip pairs, as a lift over its share of trips; ``other``: pairs of two different
    products only (the product's own repeat is already a history feature)."""
    other = pairs.copy()
    np.fill_diagonal(other, 0)
    out = {}
    for name, matrix, n_trips in (("last", pairs, 1), ("last_other", other, 1)) + (
        ("last3_other", other, 3),
    ):
        recent = sp.csr_matrix((len(end), incidence.shape[1]), dtype=np.float32)
        for back in range(1, n_trips + 1):
            idx = end - back
            valid = (idx >= start).astype(np.float32)
            recent = recent + sp.diags(valid) @ incidence[np.maximum(idx, 0)]
        recent.data = np.minimum(recent.data, 1.0)
        followed = np.zeros(len(token))
        for lo in range(0, len(end), _CHUNK):
            block = np.asarray(recent[lo : lo + _CHUNK] @ matrix)  # (chunk, V)
            here = (row >= lo) & (row < lo + _CHUNK)
            followed[here] = block[row[here] - lo, token[here]]
        prob = followed / np.maximum(np.asarray(recent @ held).ravel()[row], 1)
        out[f"t_lift_{name}"] = np.log1p(prob / np.maximum(share[token], 1e-9))
        if name == "last_other":
            out["t_prob_other"] = prob
    return out


def with_store_and_transition(
    rows: pl.DataFrame,  # row (basket), token, ...: one row per (basket, history product)
    data,  # the baskets' TrainingSet
    basket_week: np.ndarray,  # (B,) week of each basket
    trip_week: np.ndarray,  # (T,) week of every trip of the set's trip store
    before_week: int,  # the basket set's first week
) -> pl.DataFrame:
    """``rows`` with the ``STORE_FEATURES`` and ``TRANSITION_FEATURES`` columns."""
    row, token = rows["row"].to_numpy(), rows["token"].to_numpy().astype(np.int64)
    ctx = data.basket_context
    columns = store_recent_features(data.trips, trip_week, ctx.store[row], basket_week[row], token)
    counts = transition_counts(trip_matrix(data), trip_week, data.trip_customer, before_week)
    columns |= transition_features(*counts, ctx.start, ctx.end, row, token)
    return rows.with_columns(pl.Series(name, values) for name, values in columns.items())


def neighbour_features(
    rows: pl.DataFrame,  # row (basket), token, ...: sorted by row
    data,  # the baskets' TrainingSet
    before_day: int,  # first day of the basket set's first week
    tifu: nb.TifuConfig,
    upcf: nb.UpcfConfig,
    chunk: int = 4_096,
) -> pl.DataFrame:
    """``rows`` with the ``NEIGHBOUR_FEATURES`` columns: each (basket, history product)'s TIFU-KNN
    and UP-CF@r scores, the evaluation's own scorers (own history before the basket's week,
    neighbour pools of every customer's trips before ``before_day``)."""
    trips = trip_matrix(data)
    tasks = SimpleNamespace(data=data, trips=trips)  # all the two scorers read of EvalTasks
    tifu_pool, upcf_pool = (
        nb.tifu_pool(data, trips, before_day),
        nb.upcf_pool(data, trips, before_day),
    )
    no_popularity = np.zeros(data.vocab.size)  # it only breaks ties among unbought products
    row, token = rows["row"].to_numpy(), rows["token"].to_numpy().astype(np.int64)
    out = {name: np.zeros(len(row)) for name in NEIGHBOUR_FEATURES}
    for lo in range(0, len(data), chunk):
        hi = min(lo + chunk, len(data))
        at = slice(*np.searchsorted(row, [lo, hi]))
        baskets = np.arange(lo, hi)
        for name, scores in (
            ("n_tifu", tifu_scores(tasks, tifu_pool, tifu, baskets)),
            ("n_upcf", upcf_scores(tasks, upcf_pool, no_popularity, upcf, baskets)),
        ):
            out[name][at] = scores.numpy()[row[at] - lo, token[at]]
    return rows.with_columns(pl.Series(name, values) for name, values in out.items())


def level_arrays(arrays: TripArrays, category: np.ndarray) -> TripArrays:
    """The trip arrays with each product token replaced by its category's (``category`` maps
    token -> category token, [PAD] kept), each category once per trip."""
    trip = np.repeat(np.arange(len(arrays.day)), np.diff(arrays.offsets))
    keys = np.unique(trip.astype(np.int64) * (category.max() + 1) + category[arrays.tokens])
    trip_of, token = keys // (category.max() + 1), keys % (category.max() + 1)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(trip_of, minlength=len(arrays.day)))])
    return dataclasses.replace(arrays, tokens=token.astype(np.int32), offsets=offsets)


def category_maps(warehouse: Warehouse, vocab, weeks) -> dict[str, np.ndarray]:
    """Per level, (V,) category token of every product token (0 = [PAD])."""
    hierarchy = (
        warehouse.scan("raw_transactions", weeks)
        .select(HIERARCHY_LEVELS)
        .unique(subset="product_id", keep="first")
        .collect()
    )
    frame = vocab.frame().join(hierarchy, on="product_id", how="left")
    out = {}
    for level in LEVELS:
        code = frame[level].fill_null("?").cast(pl.Categorical).to_physical().to_numpy() + 1
        table = np.zeros(vocab.size, dtype=np.int64)
        table[frame["token"].to_numpy()] = code
        out[level] = table
    return out


def product_stats(trips: pl.DataFrame, vocab, before_week: int) -> np.ndarray:
    """(V, 4) ``PRODUCT_FEATURES`` of every token from every customer's trips before a week."""
    items = (
        trips.filter(pl.col("week") < before_week)
        .select("customer_id", "week", pl.col("products").alias("product_id"))
        .explode("product_id", empty_as_null=True)
    )
    stats = items.group_by("product_id").agg(
        pl.len().alias("n"),
        pl.col("customer_id").n_unique().alias("buyers"),
        (pl.col("week") >= before_week - 4).sum().alias("recent"),
    )
    frame = vocab.frame().join(stats, on="product_id", how="left").fill_null(0)
    table = np.zeros((vocab.size, len(PRODUCT_FEATURES)), dtype=np.float32)
    n = frame["n"].to_numpy().astype(np.float64)
    table[frame["token"].to_numpy()] = np.stack(
        [
            np.log1p(n),
            np.log1p(frame["buyers"].to_numpy()),
            (n - frame["buyers"].to_numpy()) / np.maximum(n, 1),
            np.log1p(frame["recent"].to_numpy()),
        ],
        axis=1,
    )
    return table
