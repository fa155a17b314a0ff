"""The repeat-ranker benchmark's own arithmetic: category-level trips and the refilled top 20."""

import math

import numpy as np
import polars as pl
import pytest

from benchmarks.bench_repeat_ranker import swapped_metrics
from benchmarks.ranker_inputs import level_arrays
from retailsim_core.datasets.history_features import TripArrays
from retailsim_core.datasets.tokens import PAD


def test_level_arrays_hold_each_category_once_per_trip():
    trips = TripArrays(
        tokens=np.array([1, 2, 3, 2, PAD], dtype=np.int32),
        offsets=np.array([0, 2, 3, 5]),
        day=np.array([0, 5, 9]),
        store=np.zeros(3, dtype=np.int64),
        hour=np.zeros(3, dtype=np.int64),
        weekend=np.zeros(3, dtype=bool),
        mission=np.zeros((3, 2), dtype=np.int64),
    )
    category = np.array([PAD, 7, 7, 8])  # products 1 and 2 share a category
    out = level_arrays(trips, category)
    assert out.offsets.tolist() == [0, 1, 2, 4]
    assert out.tokens.tolist() == [7, 8, PAD, 7]
    assert out.day.tolist() == [0, 5, 9]


def _tops(top, hit, n_true):
    return pl.DataFrame(
        {"row": [0], "top": [top], "hit": [hit], "n_true": [n_true]},
        schema={
            "row": pl.Int64,
            "top": pl.List(pl.Int64),
            "hit": pl.List(pl.Boolean),
            "n_true": pl.Int64,
        },
    )


def test_swapped_metrics_reorder_only_the_history_slots():
    # the model's list: history 5 (not bought), new product 9 (bought), history 7 (bought)
    tops = _tops([5, 9, 7], [False, True, True], 2)
    rows = pl.DataFrame(
        {
            "row": [0, 0],
            "token": [5, 7],
            "label": [False, True],
            "model": [2.0, 1.0],
            "other": [1.0, 2.0],
        },
        schema_overrides={"row": pl.Int64, "token": pl.Int64},
    )
    ideal = 1 + 1 / math.log2(3)
    recall, ndcg = swapped_metrics(rows, tops, "model")
    assert recall == 1.0
    assert ndcg == pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / ideal)
    recall, ndcg = swapped_metrics(rows, tops, "other")  # 7 moves to the first slot
    assert recall == 1.0
    assert ndcg == pytest.approx(1.0)
