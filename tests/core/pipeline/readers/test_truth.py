"""Planted truth is used only with the raw files it was generated with (issue #21 item 1)."""

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from retailsim_core.pipeline.evaluation_run import evaluate
from retailsim_core.pipeline.readers.truth import bind_truth, ingested_files, read_truth
from retailsim_core.storage.io import sha256_of
from retailsim_core.synth.world import FINGERPRINT_FILE
from retailsim_core.synth.writer import generate


def test_the_generator_fingerprints_every_file_it_wrote(tiny_dataset):
    weeks = json.loads((tiny_dataset["truth"] / FINGERPRINT_FILE).read_text())["weeks"]
    files = sorted(tiny_dataset["raw"].glob("transactions_*.csv"))
    assert len(weeks) == len(files) == 13  # 14 weeks, week 4 left out
    assert "4" not in weeks
    assert sorted(weeks.values()) == sorted(sha256_of(p) for p in files)


def test_truth_generated_with_the_ingested_files_is_used(tiny_warehouse):
    wh = tiny_warehouse["warehouse"]
    binding = bind_truth(tiny_warehouse["truth"], wh)
    assert binding.truth_dir == tiny_warehouse["truth"] and binding.note is None
    assert set(ingested_files(wh)) == set(range(1, 15)) - {4}
    assert bind_truth(None, wh) == bind_truth(tiny_warehouse["truth"] / "absent", wh)
    assert bind_truth(None, wh).truth_dir is None and bind_truth(None, wh).note is None


@pytest.fixture(scope="module")
def other_truth(tmp_path_factory, tiny_cfg):
    """Truth of another world (seed 7): same week numbers, other files."""
    root = tmp_path_factory.mktemp("other")
    generate(tiny_cfg.replace(seed=7), root / "raw", root / "truth", weeks=range(1, 15))
    return root / "truth"


def test_truth_of_other_files_is_skipped_with_a_note_that_names_the_setting(
    tiny_warehouse, other_truth
):
    binding = bind_truth(other_truth, tiny_warehouse["warehouse"])
    assert binding.truth_dir is None
    assert "RETAILSIM_TRUTH_DIR" in binding.note and "13 of 13" in binding.note
    assert "first: week 1" in binding.note


def test_truth_without_a_fingerprint_is_not_trusted(tiny_warehouse, tmp_path):
    copy = tmp_path / "truth"
    shutil.copytree(tiny_warehouse["truth"], copy)
    (copy / FINGERPRINT_FILE).unlink()
    binding = bind_truth(copy, tiny_warehouse["warehouse"])
    assert binding.truth_dir is None and FINGERPRINT_FILE in binding.note


def test_one_changed_week_file_is_enough_to_skip_the_truth(tiny_warehouse, tmp_path):
    copy = tmp_path / "truth"
    shutil.copytree(tiny_warehouse["truth"], copy)
    body = json.loads((copy / FINGERPRINT_FILE).read_text())
    body["weeks"]["9"] = "0" * 64
    (copy / FINGERPRINT_FILE).write_text(json.dumps(body))
    binding = bind_truth(copy, tiny_warehouse["warehouse"])
    assert binding.truth_dir is None and "1 of 13" in binding.note and "week 9" in binding.note


class _Stop(Exception):
    pass


def test_the_evaluation_says_a_mismatched_truth_before_any_work(tiny_warehouse, other_truth):
    """The first thing the evaluation logs is the skipped truth: no model loaded, no baseline
    tuned (the log raises at the first message, so nothing after it runs)."""
    said = []

    def log(message):
        said.append(message)
        raise _Stop

    with pytest.raises(_Stop):
        evaluate(tiny_warehouse["warehouse"], tiny_warehouse["split"], other_truth, log=log)
    assert len(said) == 1 and "not used" in said[0] and "RETAILSIM_TRUTH_DIR" in said[0]


def test_the_truth_is_read_once_into_one_value(tiny_warehouse):
    """``read_truth``: the world, every planted basket's context and the calendar, or None."""
    wh = tiny_warehouse["warehouse"]
    truth = read_truth(bind_truth(tiny_warehouse["truth"], wh))
    assert truth.world is not None and truth.promotions.height > 0
    weeks = truth.baskets["week"].unique().sort().to_list()
    assert len(weeks) == len(list((tiny_warehouse["truth"] / "baskets").glob("*.parquet")))
    samples = truth.baskets.filter(pl.col("week") == weeks[1]).select("basket_id", "week")[::-1]
    ctx = truth.context(samples)
    assert ctx["basket_id"].to_list() == samples["basket_id"].to_list()  # the samples' order
    with pytest.raises(ValueError, match="lacks some evaluated baskets"):
        truth.context(pl.DataFrame({"basket_id": [samples["basket_id"][0]], "week": [weeks[0]]}))
    assert read_truth(bind_truth(None, wh)) is None


def test_no_module_outside_synth_and_the_readers_loads_the_world():
    root = Path(__file__).resolve().parents[4] / "retailsim_core"
    callers = {
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if "load_world(" in p.read_text() or "PlantedTruth.read(" in p.read_text()
    }
    assert callers == {"synth/world.py", "pipeline/readers/truth.py"}
