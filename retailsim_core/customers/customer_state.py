"""Customer-level running counts behind the as-of snapshots (design §2.4 store affinity, §2.5
mission patterns).

A *visit* is one basket (BASKET_ID). Snapshots are built incrementally: ``CustomerState`` holds
running counts and ``advance`` folds in one week's visits; ``customer_features`` turns the
counts into features.

LA / MM / UM are LGSR's affluence codes (Less Affluent, Mid Market, Up Market); the price
sensitivity score is LA = 1, MM = 0.5, UM = 0 and XX is left out (docs/decisions.md, D1).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from retailsim_core.ingest.lgsr import MISSION_FOCI, MISSION_TYPES

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
