"""Visits and store choice forecast from the weeks before, and their scores, on tiny frames."""

import datetime as dt

import numpy as np
import polars as pl
import pytest

from retailsim_core.demand.trips.mailer import mailer_staples
from retailsim_core.demand.trips.trip_check import store_scores, visit_scores
from retailsim_core.demand.trips.visits import (
    VISIT_FEATURES,
    TripsConfig,
    chosen_features,
    log_loss,
    store_choice,
    visit_features,
    visit_forecasts,
    visit_panel,
)

CAL = pl.LazyFrame(
    {"week": pl.Series(range(1, 80), dtype=pl.Int16), "week_sin": 0.0, "week_cos": 1.0,
     "holidays": pl.Series([0] * 79, dtype=pl.Int8)}
)  # fmt: skip
NO_MAILER = pl.LazyFrame(schema={"week": pl.Int16, "mailer_products": pl.Int32})
NO_STAPLES = pl.LazyFrame(
    schema={"customer_id": pl.String, "week": pl.Int16, "mailer_staples": pl.Int32,
            "mailer_staple_share": pl.Float64}
)  # fmt: skip


def _trips(rows) -> pl.LazyFrame:
    """(customer, week, basket, store) trips; the day orders a week's trips."""
    return pl.DataFrame(
        [(c, w, b, s, dt.date(2020, 1, 1) + dt.timedelta(days=b), 10) for c, w, b, s in rows],
        schema={"customer_id": pl.String, "week": pl.Int16, "basket_id": pl.Int64,
                "store_id": pl.String, "shop_date": pl.Date, "shop_hour": pl.Int8},
        orient="row",
    ).lazy()  # fmt: skip


def test_the_visit_panel_starts_at_the_first_trip_and_the_features_read_earlier_weeks():
    trips = _trips([("A", 2, 1, "S"), ("A", 2, 2, "S"), ("A", 4, 3, "S"), ("B", 6, 4, "S")])
    panel = visit_panel(trips, first_forecast_week=5, last_week=6)
    # B's first trip falls in a forecast week: not a customer known before, not forecast
    assert panel.collect()["customer_id"].unique().to_list() == ["A"]
    out = visit_features(panel, CAL, NO_MAILER, NO_STAPLES, smoothing=0.5).collect()
    assert out["week"].to_list() == [2, 3, 4, 5, 6]
    assert out["trips"].to_list() == [2, 0, 1, 0, 0]
    assert out["tenure"].to_list() == [0, 1, 2, 3, 4]
    assert out["rate_4"].to_list()[1:] == pytest.approx([1.0, 0.5, 2 / 3, 0.5])
    assert out["weeks_since"].to_list() == [None, 1, 2, 1, 2]
    assert out["trips_per_visit"].to_list()[1:] == pytest.approx([2.0, 2.0, 1.5, 1.5])
    # the baseline: (visits in the last 4 weeks + 0.5) / (weeks + 1)
    assert out["recent_rate_4"].to_list()[3] == pytest.approx((2 + 0.5) / (3 + 1))
    # changing week 5 and later leaves week 5's features as they were
    more = _trips([("A", 2, 1, "S"), ("A", 2, 2, "S"), ("A", 4, 3, "S"), ("A", 5, 9, "S")])
    again = visit_features(visit_panel(more, first_forecast_week=5, last_week=6), CAL,
                           NO_MAILER, NO_STAPLES, smoothing=0.5).collect()  # fmt: skip
    cols = ["rate_4", "rate_13", "rate_all", "weeks_since", "trips_per_visit", "recent_rate_13"]
    assert (
        again.filter(pl.col("week") == 5)
        .select(cols)
        .equals(out.filter(pl.col("week") == 5).select(cols))
    )


def test_the_visit_model_learns_who_comes_more_often_than_a_flat_rate():
    rng = np.random.default_rng(0)
    rows, basket = [], 0
    for c in range(300):  # half the customers alternate weeks: a rate cannot say which week
        alternate = c % 2 == 0
        for w in range(1, 61):
            if (alternate and w % 2 == 0) or (not alternate and rng.random() < 0.5):
                basket += 1
                rows.append((f"C{c:03d}", w, basket, "S"))
    frame = visit_features(visit_panel(_trips(rows), first_forecast_week=51, last_week=60), CAL,
                           NO_MAILER, NO_STAPLES, smoothing=0.5).collect()  # fmt: skip
    cfg = TripsConfig(train_weeks=40, n_estimators=80)
    visits = visit_forecasts(frame, first_forecast_week=51, cfg=cfg)
    assert visits.height == 300 * 10
    assert visits.equals(visit_forecasts(frame, first_forecast_week=51, cfg=cfg))  # same seed
    out = visit_scores(visits, n_boot=100, seed=0)
    assert out["p_visit"]["log_loss"] < out["recent_rate_13"]["log_loss"] - 0.1
    assert out["p_visit"]["minus_recent_rate_13_interval"][1] < 0


def test_the_store_forecast_counts_recent_trips_and_the_baseline_is_the_last_store():
    trips = _trips([("A", 1, 1, "S1"), ("A", 2, 2, "S1"), ("A", 3, 3, "S1"), ("A", 4, 4, "S2"),
                    ("A", 5, 5, "S1"), ("A", 5, 6, "S2")])  # fmt: skip
    out = store_choice(trips, first_week=5, last_week=5, half_life=4.0).collect()
    # 3 trips to S1 weighted 2^(-4/4) .. 2^(-2/4) outweigh one S2 trip a week ago
    assert out.select("basket_id", "store_id", "predicted", "last_store").rows() == [
        (5, "S1", "S1", "S2"),
        (6, "S2", "S1", "S2"),
    ]
    short = store_choice(trips, first_week=5, last_week=5, half_life=0.3).collect()
    assert short["predicted"].to_list() == ["S2", "S2"]
    scores = store_scores(out, n_boot=50, seed=0)
    assert scores["predicted"]["accuracy"] == 0.5 and scores["last_store"]["accuracy"] == 0.5
    assert scores["trips"] == 2


def test_log_loss_is_finite_at_certain_forecasts():
    got = log_loss(np.array([1.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0]))
    assert np.isfinite(got).all() and got[2] == pytest.approx(-np.log(1e-6))


def _product_trips(rows) -> pl.LazyFrame:
    """(customer, week, basket, store, region, products) trips."""
    return pl.DataFrame(
        [(c, w, b, s, r, ps, dt.date(2020, 1, 1) + dt.timedelta(days=b), 10)
         for c, w, b, s, r, ps in rows],
        schema={"customer_id": pl.String, "week": pl.Int16, "basket_id": pl.Int64,
                "store_id": pl.String, "store_region": pl.String,
                "products": pl.List(pl.String), "shop_date": pl.Date, "shop_hour": pl.Int8},
        orient="row",
    ).lazy()  # fmt: skip


def _plan(rows) -> pl.LazyFrame:
    return pl.DataFrame(
        rows, schema={"week": pl.Int16, "product_id": pl.String, "store_id": pl.String,
                      "mailer": pl.Boolean}, orient="row",
    ).lazy()  # fmt: skip


def test_mailer_staples_count_products_bought_twice_before_the_week_in_the_regions_mailer():
    trips = _product_trips([
        ("A", 1, 1, "S1", "N", ["P1", "P2"]),
        ("A", 2, 2, "S1", "N", ["P1", "P2", "P3"]),
        ("A", 3, 3, "S2", "S", ["P3"]),  # P3's second trip; A's last store is now in S
        ("A", 4, 4, "S1", "N", ["P1", "P3"]),  # week 4's own trip: never read for week 4
        ("B", 1, 5, "S1", "N", ["P1"]),
    ])  # fmt: skip
    plan = _plan([
        (3, "P1", "S1", True), (3, "P2", "S1", True), (3, "P3", "S2", True),
        (4, "P1", "S1", True), (4, "P3", "S1", True), (4, "P3", "S2", False),
        (4, "P2", "S2", True),
    ])  # fmt: skip
    panel = visit_panel(trips.select("customer_id", "week", "basket_id"), first_forecast_week=3,
                        last_week=4)  # fmt: skip
    got = mailer_staples(panel, trips, plan, weeks=(3, 4)).collect().sort("customer_id", "week")
    # week 3: A's last trip (week 2) was in region N, whose mailer has P1 and P2, both bought on
    # two trips before week 3; P3 is in S's mailer and had one trip before week 3.
    # week 4: A's last trip (week 3) was in S, whose mailer has P2 (a staple); P1 and P3 are
    # in N's mailer only. B bought P1 once: no staple.
    assert got.select("customer_id", "week", "mailer_staples").rows() == [("A", 3, 2), ("A", 4, 1)]
    # their share of A's staples: P1 and P2 before week 3; P3 too before week 4
    assert got["mailer_staple_share"].to_list() == pytest.approx([1.0, 1 / 3])


def test_mailer_staples_read_nothing_of_the_week_they_describe():
    base = [("A", 1, 1, "S1", "N", ["P1"]), ("A", 2, 2, "S1", "N", ["P1"])]
    plan = _plan([(3, "P1", "S1", True), (3, "P2", "S1", True)])
    later = base + [("A", 3, 3, "S1", "N", ["P2"]), ("A", 3, 4, "S1", "N", ["P2"])]
    out = []
    for rows in (base, later):
        trips = _product_trips(rows)
        panel = visit_panel(trips.select("customer_id", "week", "basket_id"),
                            first_forecast_week=3, last_week=3)  # fmt: skip
        out.append(mailer_staples(panel, trips, plan, weeks=(3, 3)).collect())
    assert out[0].equals(out[1]) and out[0]["mailer_staples"].to_list() == [1]


def _staple_frame(informative: bool):
    """300 customers x 60 weeks whose mailer holds n of their staples (share n / 4); a visit's
    chance grows with n where ``informative``, else n is noise."""
    rng = np.random.default_rng(1)
    rows, staples, basket = [], [], 0
    for c in range(300):
        for w in range(1, 61):
            n = int(rng.integers(0, 3))
            staples.append((f"C{c:03d}", w, n, n / 4))
            if rng.random() < 0.15 + (0.3 * n if informative else 0.3):
                basket += 1
                rows.append((f"C{c:03d}", w, basket, "S"))
    panel = visit_panel(_trips(rows), first_forecast_week=51, last_week=60)
    lazy = pl.DataFrame(staples, schema=NO_STAPLES.collect_schema(), orient="row").lazy()
    return visit_features(panel, CAL, NO_MAILER, lazy, smoothing=0.5).collect(), lazy.collect()


def test_the_visit_forecast_reports_the_same_week_without_its_mailer():
    frame, staples = _staple_frame(informative=True)
    visits = visit_forecasts(frame, first_forecast_week=51,
                             cfg=TripsConfig(train_weeks=40, n_estimators=80))  # fmt: skip
    got = visits.join(staples, on=["customer_id", "week"])
    lift = got.group_by("mailer_staples").agg((pl.col("p_visit") / pl.col("p_visit_no_mailer"))
                                              .mean()).sort("mailer_staples")  # fmt: skip
    # no staple in the mailer: the same week as without it; more staples, a larger lift
    assert lift["p_visit"].to_list()[0] == pytest.approx(1.0)
    assert lift["p_visit"].to_list()[2] > lift["p_visit"].to_list()[1] > 1.2


def test_the_staples_share_is_kept_only_where_the_validation_weeks_say_it_helps():
    cfg = TripsConfig(train_weeks=30, n_estimators=80)
    useful, _ = _staple_frame(informative=True)
    chosen, losses = chosen_features(useful, valid_weeks=(41, 50), cfg=cfg)
    assert chosen == VISIT_FEATURES and losses["with_staples"] < losses["without_staples"] - 0.01
    noise, _ = _staple_frame(informative=False)
    chosen, losses = chosen_features(noise, valid_weeks=(41, 50), cfg=cfg)
    assert abs(losses["with_staples"] - losses["without_staples"]) < 0.01
    assert chosen == (
        VISIT_FEATURES
        if losses["with_staples"] < losses["without_staples"]
        else tuple(f for f in VISIT_FEATURES if f != "mailer_staple_share")
    )
    # the forecast weeks are never read: changing them changes no choice
    later = noise.with_columns(
        visited=pl.when(pl.col("week") > 50).then(~pl.col("visited")).otherwise("visited")
    )
    assert chosen_features(later, valid_weeks=(41, 50), cfg=cfg) == (chosen, losses)
