"""The learning-curve benchmark's rows: one per epoch, measured against popularity."""

import pytest

from benchmarks.bench_sequential import curve_rows, summary_row

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
    assert summary_row("SASRec", INFO, 0.06)[-1] == "above G-TopFreq"
    assert summary_row("SASRec", INFO, 0.09)[-1] == "not above G-TopFreq"
    assert summary_row("SASRec", INFO, 0.06)[:5] == ["SASRec", 3, 2, 0.08, "patience"]


def test_a_curve_without_its_seconds_is_refused():
    with pytest.raises(ValueError):
        curve_rows("SASRec", INFO | {"curve_seconds": [40.0]}, 0.06)
