"""The learning-curve benchmark's rows: one per epoch, measured against popularity."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from benchmarks.bench_sequential import curve_rows, runs, summary_row, top_k_profile

INFO = {
    "valid_curve": [0.05, 0.08, 0.07],
    "curve_seconds": [40.0, 80.0, 121.0],
    "valid_R@20": 0.08,
    "epochs": 3,
    "best_epoch": 2,
    "stopped_by": "patience",
}


def test_each_epoch_is_a_row_with_its_distance_to_popularity():
    rows = curve_rows("SASRec", INFO, popularity=0.06)
    assert [r[:3] for r in rows] == [["SASRec", 1, 40.0], ["SASRec", 2, 80.0], ["SASRec", 3, 121.0]]
    assert [r[4] for r in rows] == pytest.approx([-0.01, 0.02, 0.01])


def test_the_verdict_compares_the_best_epoch_with_popularity():
    profile = {"popular": 0.5, "bought_before": 0.25}
    assert summary_row("SASRec", INFO, 0.06, profile)[-1] == "above G-TopFreq"
    assert summary_row("SASRec", INFO, 0.09, profile)[-1] == "not above G-TopFreq"
    assert summary_row("SASRec", INFO, 0.06, profile)[:7] == [
        "SASRec",
        3,
        2,
        0.08,
        0.5,
        0.25,
        "patience",
    ]


def test_the_top_k_profile_counts_popular_and_repeat_picks():
    """Row 0 ranks products 0, 1 first, popularity 1, 2: one of two shared; the shopper bought
    product 0 only. Row 1 ranks 2, 1: both popular; bought 3 (not picked)."""
    scores = torch.tensor([[4.0, 3.0, 1.0, 0.0], [0.0, 3.0, 4.0, 1.0]])
    popular = torch.tensor([[0.0, 9.0, 8.0, 1.0]]).expand(2, 4)
    bought = sp.csr_matrix(np.array([[2, 0, 0, 0], [0, 0, 0, 1]]))
    profile = top_k_profile(scores, popular, bought, k=2)
    assert profile == {"popular": pytest.approx(0.75), "bought_before": pytest.approx(0.25)}


def test_a_curve_without_its_seconds_is_refused():
    with pytest.raises(ValueError):
        curve_rows("SASRec", INFO | {"curve_seconds": [40.0]}, 0.06)


def test_a_sweep_trains_each_kind_at_each_rate_and_names_the_rate():
    assert runs(["sasrec", "bert4rec"], [3e-3], 3e-3) == [
        ("sasrec", "SASRec", 3e-3),
        ("bert4rec", "BERT4Rec", 3e-3),
    ]
    assert runs(["bert4rec"], [3e-3, 1e-2], 3e-3) == [
        ("bert4rec", "BERT4Rec lr 0.003", 3e-3),
        ("bert4rec", "BERT4Rec lr 0.01", 1e-2),
    ]
