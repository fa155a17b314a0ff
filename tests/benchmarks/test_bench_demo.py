"""The make-target benchmark's verdicts and its reading of a clone without a Dagster instance."""

from benchmarks.bench_demo import _verdict, step_seconds


def test_each_target_is_judged_against_its_own_bound():
    assert _verdict("demo", 19 * 60) == "<= 20 min: met"
    assert _verdict("test", 6 * 60 + 1) == "<= 6 min: not met"
    assert _verdict("quick tests", 90) == "<= 90 s: met"
    assert _verdict("completejourney-graph", 1.0) is None  # no target: no verdict


def test_a_clone_that_ran_no_dagster_step_has_no_step_times(tmp_path):
    assert step_seconds(tmp_path / "data" / "dagster_home") == {}
