"""Per (customer, product) history statistics: a literal case by hand, and the vectorised batch
against a slow per-basket reference on random stores (hypothesis)."""

import math
from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from retailsim_core.datasets import history_features as history_module
from retailsim_core.datasets.history_features import (
    HISTORY_FEATURES,
    BasketContext,
    SeasonIndex,
    TripArrays,
    history_features,
)
from retailsim_core.datasets.tokens import PAD


def _trips(baskets, day, store, hour, weekend, mission):
    offsets = np.concatenate([[0], np.cumsum([len(b) for b in baskets])]).astype(np.int64)
    tokens = np.array([t for b in baskets for t in b], dtype=np.int32)
    return TripArrays(
        tokens=tokens,
        offsets=offsets,
        day=np.asarray(day),
        store=np.asarray(store),
        hour=np.asarray(hour),
        weekend=np.asarray(weekend, dtype=bool),
        mission=np.asarray(mission).reshape(-1, 2),
    )


def test_literal_history_by_hand():
    # one customer: trips on days 0, 10, 16 (the basket is on day 20 at store 1, 18h, a weekday)
    trips = _trips(
        [[3, 4], [3, PAD], [3]],
        day=[0, 10, 16],
        store=[1, 2, 1],
        hour=[18, 9, 17],
        weekend=[False, True, False],
        mission=[[1, 1], [3, 2], [1, 1]],
    )
    ctx = BasketContext(
        start=np.array([0]),
        end=np.array([3]),
        day=np.array([20]),
        store=np.array([1]),
        hour=np.array([18]),
        weekend=np.array([False]),
    )
    products, values = history_features(trips, ctx)
    assert products.tolist() == [[3, 4]]  # [PAD] (unknown) is no product
    f = {name: values[0, 0, i] for i, name in enumerate(HISTORY_FEATURES)}
    ages = np.array([20.0, 10.0, 4.0])
    assert f["log_count"] == np.float32(math.log(4)) and f["share_of_trips"] == 1.0
    assert f["decay_14d"] == np.float32(np.exp(-ages / 14).sum())
    assert f["trip_decay_0.9"] == np.float32(1 + 0.9 + 0.81)
    assert f["log_days_since_last"] == np.float32(math.log1p(4))
    mean_interval = (20 - 4) / 2
    assert f["interval_ratio"] == np.float32(math.log1p(4) - math.log1p(mean_interval))
    assert f["log_count_at_store"] == np.float32(math.log1p(2)) and f["share_at_store"] == 1.0
    assert f["log_count_same_weekpart"] == np.float32(math.log1p(2))
    assert f["log_count_same_hour"] == np.float32(math.log1p(2))  # 18h and 17h, not 9h
    assert f["in_last_trip"] == 1.0 and f["in_last_3_trips"] == 3.0
    assert f["in_last_trip_at_store"] == 1.0 and f["store_trip_decay"] == np.float32(
        1 + 0.8
    )  # days 16, 0
    assert f["log_count_focus_1"] == np.float32(math.log1p(2)) and f[
        "log_count_focus_2"
    ] == np.float32(math.log1p(1))
    assert f["log_count_type_3"] == np.float32(math.log1p(1))
    assert f["log_history_trips"] == np.float32(math.log1p(3))
    assert f["log_days_since_last_trip"] == np.float32(math.log1p(4))
    g = {name: values[0, 1, i] for i, name in enumerate(HISTORY_FEATURES)}
    assert g["log_count"] == np.float32(math.log(2)) and g["in_last_trip"] == 0.0
    assert g["interval_ratio"] == 0.0 and g["log_days_since_first"] == np.float32(math.log1p(20))


def _weekly_store(weeks_of_5, extra_weeks=()):
    """One trip a week in weeks 74..125 buying product 6, product 5 too in ``weeks_of_5``, then
    trips buying product 5 in ``extra_weeks``."""
    weeks = list(range(74, 126))
    baskets = [[6, 5] if w in weeks_of_5 else [6] for w in weeks] + [[5] for _ in extra_weeks]
    days = [7 * w + 1 for w in [*weeks, *extra_weeks]]
    n = len(days)
    return _trips(baskets, days, [1] * n, [10] * n, [False] * n, [[1, 1]] * n)


def test_season_features_by_hand_and_blind_to_the_last_26_weeks():
    # the basket: week 152 (day 7 * 152 + 3); its season window is weeks 98..102 a year before
    ctx = BasketContext(
        start=np.array([0]),
        end=np.array([52]),
        day=np.array([7 * 152 + 3]),
        store=np.array([1]),
        hour=np.array([10]),
        weekend=np.array([False]),
    )
    trips = _weekly_store(weeks_of_5=range(98, 103))
    products, values = history_features(trips, ctx)
    f = {
        int(p): dict(zip(HISTORY_FEATURES, values[0, i], strict=True))
        for i, p in enumerate(products[0])
    }
    # product 5: 5 of the window's 5 trips against 5 of the year's 52 and 0 of the 8 lead weeks
    assert f[5]["season_lift"] == np.float32(math.log(10 / (5 * 5 / 52 + 5)))
    assert f[5]["season_trend"] == np.float32(math.log(10 / 5))
    assert f[6]["season_lift"] == 0.0 and f[6]["season_trend"] == 0.0  # bought every week
    # the explore path's table: the same lifts for every token, 0 for tokens never sold
    dense = trips.season.dense(ctx.day, 9)  # (1, V, 2)
    assert np.array_equal(dense[0, 5], [f[5]["season_lift"], f[5]["season_trend"]])
    assert (dense[0, [0, 1, 7, 8]] == 0).all() and (dense[0, 6] == 0).all()
    # the customer's own purchases 364 +- 21 days before: weeks 100..104 hold days 703..731
    age = 7 * 152 + 3 - np.array([7 * w + 1 for w in range(98, 103)])
    assert f[5]["log_count_same_season"] == np.float32(math.log1p((np.abs(age - 364) <= 21).sum()))
    # trips of weeks 126 on (the last 26 weeks before the basket, and later) change nothing
    later = _weekly_store(weeks_of_5=range(98, 103), extra_weeks=range(126, 160))
    assert np.array_equal(history_features(later, ctx)[1], values)
    # ... while week 125 is inside the year it is compared with
    earlier = _weekly_store(weeks_of_5=range(98, 103), extra_weeks=[125])
    assert not np.array_equal(history_features(earlier, ctx)[1], values)


def _same_season_reference(ages: np.ndarray, day: int, first_day: int) -> float:
    """log1p of the mean, over the years (364 and 728 days back) whose +-21-day window starts
    on or after the store's first day, of the purchases in that window; 0 without such a year."""
    years = [a for a in (364, 728) if day - a - 21 >= first_day]
    n = sum(abs(x - a) <= 21 for x in ages for a in years)
    return float(np.log1p(n / max(len(years), 1)))


def _season_reference(trips: TripArrays, day: int, p: int) -> tuple[float, float]:
    """Every customer's trips, one by one: the product's share of trips in weeks -54..-50 (the
    same week a year before, +-2) against weeks -78..-27 and against weeks -62..-55; each 0
    where the windows it reads start before the store's first week (D112)."""
    week = day // 7
    first = min(int(d) // 7 for d in trips.day)

    def counts(lo: int, hi: int) -> tuple[int, int]:
        rows = [t for t in range(len(trips.day)) if lo <= trips.day[t] // 7 - week < hi]
        bought = sum(p in trips.tokens[trips.offsets[t] : trips.offsets[t + 1]] for t in rows)
        return bought, len(rows)

    n_win, t_win = counts(-54, -49)

    def lift(n_ref: int, t_ref: int) -> float:
        return math.log((n_win + 5) / (n_ref * t_win / max(t_ref, 1) + 5))

    season = lift(*counts(-78, -26)) if week - 54 >= first else 0.0
    trend = lift(*counts(-62, -54)) if week - 62 >= first else 0.0
    return season, trend


def _reference(trips: TripArrays, ctx: BasketContext, row: int) -> dict[int, np.ndarray]:
    """One basket, product by product, the obvious way."""
    history = list(range(ctx.start[row], ctx.end[row]))
    out = {}
    products = sorted(
        {
            int(t)
            for tr in history
            for t in trips.tokens[trips.offsets[tr] : trips.offsets[tr + 1]]
            if t != PAD
        }
    )
    n = len(history)
    at_store = [tr for tr in history if trips.store[tr] == ctx.store[row]]
    for p in products:
        bought = [
            tr for tr in history if p in trips.tokens[trips.offsets[tr] : trips.offsets[tr + 1]]
        ]
        ages = np.array([ctx.day[row] - trips.day[tr] for tr in bought], dtype=np.float64)
        ago = np.array([n - 1 - history.index(tr) for tr in bought], dtype=np.float64)
        c = len(bought)
        mean_interval = (ages.max() - ages.min()) / (c - 1) if c > 1 else 0.0
        here = sum(trips.store[tr] == ctx.store[row] for tr in bought)
        last_day = trips.day[history[-1]]
        vals = [
            np.log1p(c),
            c / n,
            *[np.exp(-ages / t).sum() for t in (14, 56, 182)],
            *[(r**ago).sum() for r in (0.9, 0.97)],
            np.log1p(ages.min()),
            np.log1p(ages.min()) - np.log1p(mean_interval) if c > 1 else 0.0,
            np.log1p(mean_interval),
            np.log1p(ages.max()),
            np.log1p(here),
            here / max(len(at_store), 1),
            np.log1p(sum(trips.weekend[tr] == ctx.weekend[row] for tr in bought)),
            np.log1p(sum(abs(int(trips.hour[tr]) - int(ctx.hour[row])) <= 2 for tr in bought)),
            float((ago == 0).sum()),
            float((ago < 3).sum()),
            (ago < 10).sum() / min(n, 10),
            float(bool(at_store) and at_store[-1] in bought),
            sum(0.8 ** (len(at_store) - 1 - at_store.index(tr)) for tr in bought if tr in at_store),
            *[np.log1p(sum(trips.mission[tr, 1] == k for tr in bought)) for k in range(1, 5)],
            *[np.log1p(sum(trips.mission[tr, 0] == k for tr in bought)) for k in range(1, 4)],
            np.log1p(n),
            np.log1p(ctx.day[row] - last_day),
            _same_season_reference(ages, int(ctx.day[row]), int(trips.day.min())),
            *_season_reference(trips, int(ctx.day[row]), p),
        ]
        out[p] = np.array(vals, dtype=np.float32)
    return out


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_batch_features_equal_the_per_basket_reference(seed):
    rng = np.random.default_rng(seed)
    n_trips = int(rng.integers(1, 60))
    # a trip lists each product once (the trip store's contract); 0 = [PAD], an unknown product
    baskets = [list(rng.choice(8, rng.integers(1, 6), replace=False)) for _ in range(n_trips)]
    trips = _trips(
        baskets,
        day=np.sort(rng.integers(0, 900, n_trips)),  # over two years: seasons
        store=rng.integers(0, 3, n_trips),
        hour=rng.integers(8, 22, n_trips),
        weekend=rng.random(n_trips) < 0.3,
        mission=rng.integers(0, 5, (n_trips, 2)),
    )
    n_b = 4
    start = rng.integers(0, n_trips, n_b)
    end = np.minimum(start + rng.integers(0, 10, n_b), n_trips)  # some empty histories
    day = trips.day[np.maximum(end - 1, 0)] + rng.integers(1, 30, n_b)
    ctx = BasketContext(
        start=start,
        end=end,
        day=day,
        store=rng.integers(0, 3, n_b),
        hour=rng.integers(8, 22, n_b),
        weekend=rng.random(n_b) < 0.3,
    )
    products, values = history_features(trips, ctx)
    for row in range(n_b):
        want = _reference(trips, ctx, row)
        got = {int(p): values[row, i] for i, p in enumerate(products[row]) if p != PAD}
        assert got.keys() == want.keys()
        for p in want:
            np.testing.assert_allclose(got[p], want[p], rtol=1e-5, atol=1e-6)
        assert (values[row, products[row] == PAD] == 0).all()


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_the_dense_season_table_equals_each_baskets_own_lifts(seed):
    """``dense`` computes a week once and serves it to every basket of that week (and every
    later call): the same bits as each basket's own vocabulary-wide lifts."""
    rng = np.random.default_rng(seed)
    weeks = rng.integers(74, 126, 80)
    baskets = [list(rng.choice(np.arange(1, 9), rng.integers(1, 4), replace=False)) for _ in weeks]
    n = len(weeks)
    trips = _trips(baskets, list(7 * weeks + 1), [1] * n, [10] * n, [False] * n, [[1, 1]] * n)
    season = trips.season
    for _ in range(2):  # the second call reads the weeks the first one stored
        day = rng.integers(7 * 120, 7 * 200, 12)
        day[3] = day[0]  # two baskets of one week
        got = season.dense(day, 11)
        for b, d in enumerate(day):
            lift, trend = season._lifts(np.array([d]), None)
            want = np.zeros((11, 2), np.float32)
            width = min(11, lift.shape[1])
            want[:width, 0], want[:width, 1] = lift[0, :width], trend[0, :width]
            assert np.array_equal(got[b], want)


def test_no_season_where_its_windows_start_before_the_store_s_first_week():
    """A basket whose window a year before starts before the data (The Complete Journey's
    Christmas weeks against its first, one-day week) gets no season, as a store without a year
    before: the lifts are 0, not a few edge weeks compared with an empty reference (D112). The
    trend's lead window reaches further back, so it needs 8 more weeks of data than the lift."""
    trips = _weekly_store(weeks_of_5=range(74, 80))  # product 5 only in the store's first weeks

    def lifts(week):
        return trips.season.lifts(np.array([7 * week + 3]), np.array([5]))

    lift, trend = lifts(74 + 52 + 1)  # season window 73..77: starts before week 74
    assert lift[0] == 0.0 and trend[0] == 0.0
    lift, trend = lifts(74 + 52 + 2)  # window 74..78 inside, its lead 66..73 is not
    assert lift[0] != 0.0 and trend[0] == 0.0
    lift, trend = lifts(74 + 52 + 10)  # both inside
    assert trend[0] != 0.0
    dense = trips.season.dense(np.array([7 * (74 + 52 + 1) + 3]), 9)
    assert (dense == 0).all()


def test_no_same_season_count_where_its_window_starts_before_the_data():
    """The customer's purchases a year before count only where the whole window (364 +- 21
    days back) lies within the store's data; before D134 a window cut by the data's start read
    its first weeks as the season (The Complete Journey: 0 in every training week, then counts
    of January in the Christmas weeks). Two covered years give their mean, not their sum."""
    first = 7 * 74 + 1  # ``_weekly_store``'s first trip day: product 6 every week from it
    trips = _weekly_store(weeks_of_5=())

    def same_season(day):
        ctx = BasketContext(
            start=np.array([0]),
            end=np.array([int((trips.day < day).sum())]),
            day=np.array([day]),
            store=np.array([1]),
            hour=np.array([10]),
            weekend=np.array([False]),
        )
        products, values = history_features(trips, ctx)
        at = int(np.flatnonzero(products[0] == 6)[0])
        return float(values[0, at, HISTORY_FEATURES.index("log_count_same_season")])

    assert same_season(first + 364 + 20) == 0.0  # the window starts a day before the data
    inside = same_season(first + 364 + 21)  # starts on the first day: 7 weekly trips in it
    assert inside == np.float32(math.log1p(7))
    # two years covered (the trips of weeks 74..125 reach both windows): the mean of the two
    both = same_season(first + 728 + 21)
    ages = first + 728 + 21 - (7 * np.arange(74, 126) + 1)
    n = sum(abs(a - y) <= 21 for a in ages for y in (364, 728))
    assert both == np.float32(math.log1p(n / 2))


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 7))
def test_the_season_counted_a_slice_of_trips_at_a_time_equals_one_count(seed, slice_trips):
    """``SeasonIndex.build`` counts ``SEASON_TRIPS`` trips at a time: the same tables as one
    count of every trip (empty trips and unknown products included)."""
    rng = np.random.default_rng(seed)
    weeks = np.sort(rng.integers(1, 30, 25))
    baskets = [list(rng.integers(0, 6, rng.integers(0, 4))) for _ in weeks]  # 0 is [PAD]
    n = len(weeks)
    trips = _trips(baskets, list(7 * weeks + 2), [1] * n, [10] * n, [False] * n, [[1, 1]] * n)
    whole = SeasonIndex.build(trips)
    with mock.patch.object(history_module, "SEASON_TRIPS", slice_trips):
        sliced = SeasonIndex.build(trips)
    assert sliced.first_week == whole.first_week
    assert np.array_equal(sliced.product_trips, whole.product_trips)
    assert np.array_equal(sliced.trips, whole.trips)
