"""Customer-level as-of snapshots (design §2.4 store affinity, §2.5 mission patterns).

Snapshot W describes each carded customer from weeks < W only: exactly what a model may know
when it predicts a week-W basket. A *visit* is one basket (BASKET_ID). Snapshots are built
incrementally: ``CustomerState`` holds running counts, ``advance`` folds in one week's visits
and the ``*_snapshot`` functions turn the counts into features. No snapshot reads the week it
describes.

LA / MM / UM are LGSR's affluence codes (Less Affluent, Mid Market, Up Market); the price
sensitivity score is LA = 1, MM = 0.5, UM = 0 and XX is left out (docs/decisions.md, D1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

from retailsim_core.lgsr import MISSION_FOCI, MISSION_TYPES

SWITCH_LOOKBACK = 4  # spec: a novel store is one not visited in the prior 4 weeks
# Running sums hold exact small integers (order-independent, so any run gives the same bytes);
# snapshots scale them: price sensitivity LA = 1, MM = 0.5, UM = 0; size S = 1/3, M = 2/3, L = 1.
SENSITIVITY_UNITS, SENSITIVITY_SCALE = {"LA": 2, "MM": 1, "UM": 0}, 0.5
SIZE_UNITS, SIZE_SCALE = {"S": 1, "M": 2, "L": 3}, 1 / 3

VISITS_SCHEMA = pl.Schema(
    {
        "customer_id": pl.String,
        "basket_id": pl.Int64,
        "week": pl.Int16,
        "store_id": pl.String,
        "store_region": pl.String,
        "basket_size": pl.String,
        "basket_price_sensitivity": pl.String,
        "basket_type": pl.String,
        "basket_dominant_mission": pl.String,
    }
)
_PAIR_SCHEMA = pl.Schema(
    {"customer_id": pl.String, "store_id": pl.String, "store_region": pl.String, "visits": pl.Int64}
)
_RECENT_SCHEMA = pl.Schema({"customer_id": pl.String, "store_id": pl.String, "week": pl.Int16})
_COUNT_COLUMNS = (
    [f"type_{t}" for t in MISSION_TYPES]
    + [f"focus_{f}" for f in MISSION_FOCI]
    + [
        "sens_n",
        "sens_sum",
        "sens_sumsq",
        "size_n",
        "size_sum",
        "size_sumsq",
        "visits",
        "visit_weeks",
        "switch_weeks",
        "first_week",
        "last_week",
    ]
)
_CUSTOMER_SCHEMA = pl.Schema({"customer_id": pl.String} | {c: pl.Float64 for c in _COUNT_COLUMNS})


def visits(raw: pl.LazyFrame) -> pl.LazyFrame:
    """One row per carded basket (uncarded shoppers have no customer features)."""
    return (
        raw.filter(pl.col("customer_id").is_not_null())
        .group_by("basket_id")
        .agg(pl.col(c).first() for c in VISITS_SCHEMA.names() if c != "basket_id")
        .select(VISITS_SCHEMA.names())
        .cast(dict(VISITS_SCHEMA))
        .sort("basket_id")
    )


@dataclass
class CustomerState:
    """Running counts over weeks < W."""

    pairs: pl.DataFrame  # visits per (customer, store)
    recent: pl.DataFrame  # (customer, store, week) of the last SWITCH_LOOKBACK weeks
    customers: pl.DataFrame  # per-customer mission counts, sums and visit weeks

    @classmethod
    def empty(cls) -> CustomerState:
        return cls(_PAIR_SCHEMA.to_frame(), _RECENT_SCHEMA.to_frame(), _CUSTOMER_SCHEMA.to_frame())


def _add(
    a: pl.DataFrame,
    b: pl.DataFrame,
    keys: list[str],
    summed: list[str],
    firsts=(),
    mins=(),
    maxs=(),
) -> pl.DataFrame:
    """Merge two count tables keyed by ``keys``: sum ``summed``, keep first/min/max of the
    others.
    """
    return (
        pl.concat([a, b], how="vertical_relaxed")
        .group_by(keys)
        .agg(
            *[pl.col(c).sum() for c in summed],
            *[pl.col(c).first() for c in firsts],
            *[pl.col(c).min() for c in mins],
            *[pl.col(c).max() for c in maxs],
        )
        .select(a.columns)
    )  # unsorted: every count is an exact integer, so order cannot matter


def advance(state: CustomerState, week_visits: pl.DataFrame, week: int) -> CustomerState:
    """Fold in the visits of ``week`` (so the state then covers weeks <= week)."""
    v = week_visits
    pairs_w = v.group_by("customer_id", "store_id").agg(
        pl.col("store_region").first(), pl.len().cast(pl.Int64).alias("visits")
    )
    pairs = _add(
        state.pairs,
        pairs_w.select(_PAIR_SCHEMA.names()),
        ["customer_id", "store_id"],
        ["visits"],
        firsts=["store_region"],
    )
    # Switching: this week counts as a switch week if a store visited now was not visited in
    # the prior SWITCH_LOOKBACK weeks. A customer's first week has no prior stores and is not
    # counted (neither as a switch nor in the denominator).
    prior = (
        state.recent.filter(pl.col("week") >= week - SWITCH_LOOKBACK)
        .select("customer_id", "store_id")
        .unique()
    )
    novel = (
        pairs_w.join(prior, on=["customer_id", "store_id"], how="anti")
        .join(state.customers.select("customer_id"), on="customer_id", how="semi")
        .select("customer_id")
        .unique()
        .with_columns(switch=pl.lit(1.0))
    )

    def score(col, mapping):
        return pl.col(col).replace_strict(mapping, default=None, return_dtype=pl.Float64)

    per_customer = (
        v.with_columns(
            sens=score("basket_price_sensitivity", SENSITIVITY_UNITS),
            size=score("basket_size", SIZE_UNITS),
        )
        .group_by("customer_id")
        .agg(
            *[
                (pl.col("basket_type") == t).sum().cast(pl.Float64).alias(f"type_{t}")
                for t in MISSION_TYPES
            ],
            *[
                (pl.col("basket_dominant_mission") == f).sum().cast(pl.Float64).alias(f"focus_{f}")
                for f in MISSION_FOCI
            ],
            pl.col("sens").count().cast(pl.Float64).alias("sens_n"),
            pl.col("sens").sum().alias("sens_sum"),
            (pl.col("sens") ** 2).sum().alias("sens_sumsq"),
            pl.col("size").count().cast(pl.Float64).alias("size_n"),
            pl.col("size").sum().alias("size_sum"),
            (pl.col("size") ** 2).sum().alias("size_sumsq"),
            pl.len().cast(pl.Float64).alias("visits"),
            pl.lit(1.0).alias("visit_weeks"),
            pl.lit(float(week)).alias("first_week"),
            pl.lit(float(week)).alias("last_week"),
        )
        .join(novel, on="customer_id", how="left")
        .with_columns(switch_weeks=pl.col("switch").fill_null(0.0))
        .drop("switch")
    )
    summed = [c for c in _COUNT_COLUMNS if c not in ("first_week", "last_week")]
    customers = _add(
        state.customers,
        per_customer.select(_CUSTOMER_SCHEMA.names()),
        ["customer_id"],
        summed,
        mins=["first_week"],
        maxs=["last_week"],
    )
    recent = pl.concat(
        [
            state.recent.filter(pl.col("week") > week - SWITCH_LOOKBACK),
            v.select(_RECENT_SCHEMA.names()).unique(),
        ]
    )
    return CustomerState(pairs=pairs, recent=recent, customers=customers)


def _entropy(cols: list[str]) -> pl.Expr:
    """Shannon entropy in bits of the distribution given by count columns (0 when no counts)."""
    total = pl.sum_horizontal(cols)
    terms = [
        pl.when(pl.col(c) > 0)
        .then(-(pl.col(c) / total) * (pl.col(c) / total).log(2))
        .otherwise(0.0)
        for c in cols
    ]
    return pl.when(total > 0).then(pl.sum_horizontal(terms))


AFFINITY_SCHEMA = pl.Schema(
    {
        "customer_id": pl.String,
        "week": pl.Int16,
        "primary_store": pl.String,
        "loyalty_score": pl.Float64,
        "switching_rate": pl.Float64,
        "region_diversity": pl.Int16,
        "total_stores_visited": pl.Int32,
        "visit_concentration": pl.Float64,
        "spatial_range": pl.Int8,
        "n_visits": pl.Int32,
        "n_visit_weeks": pl.Int32,
        "first_week": pl.Int16,
        "weeks_since_last_visit": pl.Int16,
    }
)


def affinity_snapshot(state: CustomerState, week: int) -> pl.DataFrame:
    """Design §2.4: store affinity of each customer as of week W (from weeks < W)."""
    visits_ = pl.col("visits")
    features = state.pairs.group_by("customer_id").agg(
        pl.col("store_id")
        .sort_by(["visits", "store_id"], descending=[True, False])
        .first()
        .alias("primary_store"),
        # HHI = sum of squared visit shares = sum(v^2) / (sum v)^2: integer sums, exact in any
        # order.
        ((visits_ * visits_).sum() / visits_.sum() ** 2).alias("loyalty_score"),
        pl.col("store_region").n_unique().cast(pl.Int16).alias("region_diversity"),
        pl.len().cast(pl.Int32).alias("total_stores_visited"),
        (visits_.sort(descending=True).head(3).sum() / visits_.sum()).alias("visit_concentration"),
        pl.col("store_region").str.slice(0, 1).n_unique().cast(pl.Int8).alias("spatial_range"),
        visits_.sum().cast(pl.Int32).alias("n_visits"),
    )
    c = state.customers.select(
        "customer_id", "visit_weeks", "switch_weeks", "first_week", "last_week"
    )
    return (
        features.join(c, on="customer_id", how="left")
        .with_columns(
            switching_rate=pl.when(pl.col("visit_weeks") > 1).then(
                pl.col("switch_weeks") / (pl.col("visit_weeks") - 1)
            ),
            weeks_since_last_visit=(week - pl.col("last_week")).cast(pl.Int16),
            first_week=pl.col("first_week").cast(pl.Int16),
            n_visit_weeks=pl.col("visit_weeks").cast(pl.Int32),
        )
        .with_columns(week=pl.lit(week, pl.Int16))
        .select(AFFINITY_SCHEMA.names())
        .cast(dict(AFFINITY_SCHEMA))
        .sort("customer_id")
    )


_TYPE_COLS = [f"type_{t}" for t in MISSION_TYPES]
_FOCUS_COLS = [f"focus_{f}" for f in MISSION_FOCI]


def _distribution(cols: list[str], names: tuple[str, ...]) -> pl.Expr:
    total = pl.sum_horizontal(cols)
    return pl.struct(
        [pl.when(total > 0).then(pl.col(c) / total).alias(n) for c, n in zip(cols, names)]
    )


def _dominant(cols: list[str], names: tuple[str, ...]) -> pl.Expr:
    """The most frequent value (ties: first in vocabulary order); null without counts."""
    best = pl.max_horizontal(cols)
    expr = pl.when(best <= 0).then(None)
    for c, n in zip(cols, names):
        expr = expr.when(pl.col(c) == best).then(pl.lit(n))
    return expr


def mission_snapshot(state: CustomerState, week: int) -> pl.DataFrame:
    """Design §2.5: mission patterns of each customer as of week W (from weeks < W)."""

    def mean(s, n, k):
        return pl.when(pl.col(n) > 0).then(k * pl.col(s) / pl.col(n))

    def var(s, ss, n, k):
        return pl.when(pl.col(n) > 0).then(
            k * k * ((pl.col(ss) * pl.col(n) - pl.col(s) ** 2) / pl.col(n) ** 2).clip(0.0, None)
        )

    h_type, h_focus = _entropy(_TYPE_COLS), _entropy(_FOCUS_COLS)
    consistency = (
        1.0 - (h_type / math.log2(len(MISSION_TYPES)) + h_focus / math.log2(len(MISSION_FOCI))) / 2
    )
    return state.customers.select(
        "customer_id",
        pl.lit(week, pl.Int16).alias("week"),
        _distribution(_TYPE_COLS, MISSION_TYPES).alias("mission_type_dist"),
        _dominant(_TYPE_COLS, MISSION_TYPES).alias("dominant_mission_type"),
        h_type.alias("mission_type_entropy"),
        _distribution(_FOCUS_COLS, MISSION_FOCI).alias("mission_focus_dist"),
        _dominant(_FOCUS_COLS, MISSION_FOCI).alias("dominant_focus"),
        h_focus.alias("focus_entropy"),
        mean("sens_sum", "sens_n", SENSITIVITY_SCALE).alias("mean_price_sensitivity"),
        var("sens_sum", "sens_sumsq", "sens_n", SENSITIVITY_SCALE)
        .sqrt()
        .alias("sensitivity_volatility"),
        mean("size_sum", "size_n", SIZE_SCALE).alias("mean_basket_size"),
        var("size_sum", "size_sumsq", "size_n", SIZE_SCALE).alias("basket_size_variance"),
        consistency.alias("mission_consistency"),
        pl.col("visits").cast(pl.Int32).alias("n_trips"),
    ).sort("customer_id")
