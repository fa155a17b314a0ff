"""Customer-level as-of snapshots (design §2.4 store affinity, §2.5 mission patterns).

Snapshot W describes each carded customer from weeks < W only: exactly what a model may know
when it predicts a week-W basket. The functions here turn the running counts of
``customer_state.CustomerState`` (advanced through week W - 1) into features; no snapshot reads
the week it describes.
"""

from __future__ import annotations

import math

import polars as pl

from retailsim_core.customers.customer_state import SENSITIVITY_SCALE, SIZE_SCALE, CustomerState
from retailsim_core.ingest.lgsr import MISSION_FOCI, MISSION_TYPES


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

MISSION_SCHEMA = pl.Schema(
    {
        "customer_id": pl.String,
        "week": pl.Int16,
        "mission_type_dist": pl.Struct({t: pl.Float64 for t in MISSION_TYPES}),
        "dominant_mission_type": pl.String,
        "mission_type_entropy": pl.Float64,
        "mission_focus_dist": pl.Struct({f: pl.Float64 for f in MISSION_FOCI}),
        "dominant_focus": pl.String,
        "focus_entropy": pl.Float64,
        "mean_price_sensitivity": pl.Float64,
        "sensitivity_volatility": pl.Float64,
        "mean_basket_size": pl.Float64,
        "basket_size_variance": pl.Float64,
        "mission_consistency": pl.Float64,
        "n_trips": pl.Int32,
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
        [
            pl.when(total > 0).then(pl.col(c) / total).alias(n)
            for c, n in zip(cols, names, strict=True)
        ]
    )


def _dominant(cols: list[str], names: tuple[str, ...]) -> pl.Expr:
    """The most frequent value (ties: first in vocabulary order); null without counts."""
    best = pl.max_horizontal(cols)
    expr = pl.when(best <= 0).then(None)
    for c, n in zip(cols, names, strict=True):
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
