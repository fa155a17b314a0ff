"""The repeat-ranker benchmark's extra inputs read only the weeks before the basket's."""

import math
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from benchmarks.ranker_inputs import (
    neighbour_features,
    store_recent_features,
    transition_counts,
    transition_features,
)
from retailsim_core.baselines import neighbour_baselines as nb
from retailsim_core.baselines.counting import trip_matrix
from retailsim_core.datasets.history_features import TripArrays
from retailsim_core.datasets.tokens import PAD
from retailsim_core.next_basket.tuning import tifu_scores, upcf_scores


def _trips(tokens: list[list[int]], store: list[int]) -> TripArrays:
    n = len(tokens)
    return TripArrays(
        tokens=np.array([t for trip in tokens for t in trip], dtype=np.int32),
        offsets=np.concatenate([[0], np.cumsum([len(t) for t in tokens])]).astype(np.int64),
        day=np.arange(n) * 7,
        store=np.array(store, dtype=np.int64),
        hour=np.zeros(n, dtype=np.int64),
        weekend=np.zeros(n, dtype=bool),
        mission=np.zeros((n, 2), dtype=np.int64),
    )


@pytest.mark.parametrize("own_week_tokens", [[1, 3], [3], [PAD]])
def test_store_recent_features_read_the_weeks_before_the_basket_only(own_week_tokens):
    # week 12 is the basket's own week: whatever was bought then must not count
    trips = _trips([[1, 2], [1], [1], own_week_tokens], store=[0, 0, 1, 0])
    week = np.array([10, 11, 11, 12])
    out = store_recent_features(trips, week, np.array([0, 0]), np.array([12, 12]), np.array([1, 3]))
    assert out["s_log_recent"] == pytest.approx([math.log1p(2), 0.0])  # trips 0 and 1 at store 0
    assert out["s_share_recent"].tolist() == [1.0, 0.0]  # of the store's 2 trips in weeks 8-11
    assert out["s_log_last_week"] == pytest.approx([math.log1p(1), 0.0])
    assert out["s_sold_recent"].tolist() == [1.0, 0.0]
    # every store: 3 trips bought product 1 in weeks 8-11, none in weeks 0-7
    assert out["g_trend"] == pytest.approx([math.log1p(3 / 4), 0.0])


def test_transition_counts_pair_consecutive_trips_of_one_customer_before_the_week():
    trips = _trips([[1, PAD], [2], [1, 2], [2], [1]], store=[0] * 5)  # [PAD]: unknown, ignored
    week = np.array([1, 2, 3, 1, 2])
    customer = np.array([0, 0, 0, 1, 1])
    matrix = trip_matrix(
        SimpleNamespace(
            trip_offsets=trips.offsets, trip_tokens=trips.tokens, vocab=SimpleNamespace(size=4)
        )
    )
    incidence, pairs, held, share = transition_counts(matrix, week, customer, 3)
    # pairs: 0 -> 1 (1 then 2) and 3 -> 4 (2 then 1); 1 -> 2 ends in week 3, 2 -> 3 crosses
    # customers
    expected = np.zeros((4, 4))
    expected[1, 2] = expected[2, 1] = 1
    np.testing.assert_array_equal(pairs, expected)
    assert held.tolist() == [0, 1, 1, 0]
    assert share.tolist() == [0, 0.5, 0.5, 0]
    assert incidence.shape == (5, 4)

    # a basket of customer 0 whose history is trips 0 and 1, and one with no history
    start, end = np.array([0, 3]), np.array([2, 3])
    out = transition_features(
        incidence, pairs, held, share, start, end, np.array([0, 0, 1]), np.array([1, 2, 1])
    )
    # last trip {2}: product 1 followed 2 once in 1 pair holding 2 -> lift 1 / 0.5
    assert out["t_lift_last"] == pytest.approx([math.log1p(2), 0.0, 0.0])
    assert out["t_prob_other"] == pytest.approx([1.0, 0.0, 0.0])
    # last 3 trips {1, 2} (trip 0 is the first of the history): 1 of 2 pairs held -> lift 1
    assert out["t_lift_last3_other"] == pytest.approx([math.log1p(1), math.log1p(1), 0.0])


class _Baskets:
    """The slice of a TrainingSet the neighbour scorers read: a trip store (customers' runs of
    trips in time order) and each basket's history bounds in it."""

    def __init__(self, tokens, customer, day, hist):
        self.trip_tokens = np.array([t for trip in tokens for t in trip], dtype=np.int32)
        self.trip_offsets = np.concatenate([[0], np.cumsum([len(t) for t in tokens])])
        self.trip_customer, self.trip_day = np.array(customer), np.array(day)
        self.full_hist_start = np.array([h[0] for h in hist])
        self.hist_end = np.array([h[1] for h in hist])
        self.vocab = SimpleNamespace(size=8)

    def __len__(self):
        return len(self.hist_end)


def _neighbour_rows(late_tokens):
    # customers 0, 1, 2: trips 0-1, 2-4, 5-6; day 14 starts the basket set (baskets of customers
    # 0 and 1, histories before it); trip 4 (day 21) is after it: in no neighbour pool
    tokens = [[1, 2], [2, 3], [1, 2], [2, 4], late_tokens, [3, 5], [5, 6]]
    data = _Baskets(tokens, [0, 0, 1, 1, 1, 2, 2], [0, 7, 0, 7, 21, 0, 7], [(0, 2), (2, 4)])
    rows = pl.DataFrame({"row": [0, 0, 0, 1, 1, 1], "token": [1, 2, 3, 2, 3, 4]})
    tifu = nb.TifuConfig(group_size=2, k_neighbours=1, alpha=0.5)
    upcf = nb.UpcfConfig(recency=2, alpha=0.5, locality=1.0, k_neighbours=1)
    return data, rows, tifu, upcf, neighbour_features(rows, data, 14, tifu, upcf, chunk=1)


def test_neighbour_features_are_the_evaluation_scorers_against_pools_before_the_set():
    data, rows, tifu, upcf, out = _neighbour_rows([6, 7])
    trips = trip_matrix(data)
    tasks = SimpleNamespace(data=data, trips=trips)
    baskets, tokens = rows["row"].to_numpy(), rows["token"].to_numpy()
    expected_tifu = tifu_scores(tasks, nb.tifu_pool(data, trips, 14), tifu, np.arange(2))
    expected_upcf = upcf_scores(tasks, nb.upcf_pool(data, trips, 14), np.zeros(8), upcf, [0, 1])
    np.testing.assert_allclose(out["n_tifu"], expected_tifu.numpy()[baskets, tokens])
    np.testing.assert_allclose(out["n_upcf"], expected_upcf.numpy()[baskets, tokens])
    assert (out["n_tifu"] > 0).all() and (out["n_upcf"] > 0).all()  # own history products
    # a trip after the set's first day never reaches another customer's scores
    assert out.filter(pl.col("row") == 0).equals(
        _neighbour_rows([1, 3])[-1].filter(pl.col("row") == 0)
    )
