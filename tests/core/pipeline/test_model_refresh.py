"""``model_refresh``: a chain of weekly refreshes from the trained checkpoint, each partition
published whole, never reading a week after its own (D111)."""

import shutil

import numpy as np
import pytest
import torch

from retailsim_core.pipeline.model_refresh import (
    MARKER,
    model_folder,
    refresh_weeks,
    through_week,
    week_models,
)
from retailsim_core.serving.scorer import weekly_scorer
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import CHECKPOINT_TABLE, REFRESH_TABLE
from retailsim_core.training.adapt.refresh import RefreshConfig
from retailsim_core.training.checkpoints import checkpoint as ckpt
from retailsim_core.training.run.train_config import TrainConfig

CFG = RefreshConfig(replay_weeks=3)


@pytest.fixture()
def warehouse(tiny_warehouse, tiny_checkpoint, tmp_path):
    """A copy of the tiny warehouse with its checkpoint (split 8 / 11, weeks 1-14)."""
    root = tmp_path / "wh"
    shutil.copytree(tiny_warehouse["warehouse"].root, root)
    return Warehouse(root)


@pytest.mark.slow
def test_the_chain_starts_at_the_last_validation_week_and_adds_a_week_each(
    warehouse, tiny_warehouse
):
    split = tiny_warehouse["split"]
    summaries = refresh_weeks(warehouse, split, range(9, 14), TrainConfig.preset("tiny"), CFG)
    by_week = {s["week"]: s for s in summaries}
    assert by_week[9]["model"] == by_week[10]["model"] == CHECKPOINT_TABLE
    assert model_folder(warehouse, 10) == warehouse.table_dir(CHECKPOINT_TABLE)
    assert by_week[11]["new_weeks"] == [9, 10, 11]  # catches up on the validation weeks
    assert by_week[11]["previous"] == CHECKPOINT_TABLE
    for week in (12, 13):
        assert by_week[week]["new_weeks"] == [week]
        assert by_week[week]["previous"] == f"week={warehouse.calendar.week_key_of(week - 1)}"
        folder = model_folder(warehouse, week)
        assert (
            folder == warehouse.partition_dir(REFRESH_TABLE, week) and through_week(folder) == week
        )
        assert ckpt.read_json(folder / MARKER)["new_samples"] > 0
    assert week_models(warehouse, [12, 13, 14]) == {
        w: warehouse.partition_dir(REFRESH_TABLE, w - 1) for w in (12, 13, 14)
    }
    assert week_models(warehouse, [15]) is None  # partition 14 was not made
    weights = [
        ckpt.load_tensors(model_folder(warehouse, w) / "model.safetensors") for w in (11, 12)
    ]
    assert any(not torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_a_partition_warm_starts_only_from_the_one_before(warehouse, tiny_warehouse):
    with pytest.raises(FileNotFoundError, match="materialize the partitions in order"):
        refresh_weeks(warehouse, tiny_warehouse["split"], [13], TrainConfig.preset("tiny"), CFG)


@pytest.mark.slow
def test_re_materializing_gives_the_same_bytes_and_no_later_week_is_read(
    warehouse, tiny_warehouse, tmp_path
):
    """Week 12's refresh is the same model whether or not weeks 13-14 exist anywhere in the
    warehouse: nothing of a later week reaches it."""
    split, train = tiny_warehouse["split"], TrainConfig.preset("tiny")
    refresh_weeks(warehouse, split, [11, 12], train, CFG)
    first = (model_folder(warehouse, 12) / "model.safetensors").read_bytes()
    refresh_weeks(warehouse, split, [11, 12], train, CFG)
    assert (model_folder(warehouse, 12) / "model.safetensors").read_bytes() == first
    cut = Warehouse(tmp_path / "cut")
    shutil.copytree(warehouse.root, cut.root)
    for table in cut.root.iterdir():
        for week in (13, 14):
            shutil.rmtree(cut.partition_dir(table.name, week), ignore_errors=True)
    shutil.rmtree(cut.table_dir(REFRESH_TABLE))
    refresh_weeks(cut, split, [11, 12], train, CFG)
    assert (model_folder(cut, 12) / "model.safetensors").read_bytes() == first


def test_each_week_is_scored_by_its_own_model():
    """Rows of three weeks scored by three models: each row gets its week's model's scores, in
    the rows' order."""

    class Constant(torch.nn.Module):
        def __init__(self, value):
            super().__init__()
            self.value = value

        def next_basket(self, batch, given_mission):
            return None, torch.full((len(batch["rows"]), 3), float(self.value))

        def excluded(self, n):
            return torch.zeros(n, 3, dtype=torch.bool)

    class Data:
        def __getitem__(self, rows):
            return {"rows": rows}

    weeks = np.array([5, 6, 7, 5, 7, 6])
    scorer = weekly_scorer({5: Constant(50), 6: Constant(60), 7: Constant(70)}, weeks, Data())
    rows = np.array([4, 0, 2, 1])
    out = scorer(rows, {"rows": rows})
    assert out[:, 0].tolist() == [70.0, 50.0, 70.0, 60.0]


@pytest.mark.slow
def test_the_newest_own_model_is_what_the_service_serves(warehouse, tiny_warehouse):
    from retailsim_core.pipeline.model_refresh import newest_model

    assert newest_model(warehouse) == warehouse.table_dir(CHECKPOINT_TABLE)
    refresh_weeks(warehouse, tiny_warehouse["split"], [9, 10], TrainConfig.preset("tiny"), CFG)
    assert newest_model(warehouse) == warehouse.table_dir(CHECKPOINT_TABLE)  # frozen weeks only
    refresh_weeks(warehouse, tiny_warehouse["split"], [11, 12], TrainConfig.preset("tiny"), CFG)
    assert newest_model(warehouse) == warehouse.partition_dir(REFRESH_TABLE, 12)
    weights = warehouse.partition_dir(REFRESH_TABLE, 12) / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8])  # damaged: the whole week before is served
    assert newest_model(warehouse) == warehouse.partition_dir(REFRESH_TABLE, 11)


@pytest.mark.slow
def test_the_evaluation_scores_each_test_week_with_the_refresh_before_it(warehouse, tiny_warehouse):
    """With the refreshes of weeks 11-13 the report holds the refreshed model beside the frozen
    one, a slice per test week (the staleness curve) and the refreshed model's paired
    differences; the frozen model's figures are the ones it has without refreshes."""
    import json

    from retailsim_core.baselines.sequential import SequentialConfig
    from retailsim_core.next_basket.eval_config import EvalConfig
    from retailsim_core.next_basket.methods import REFRESHED
    from retailsim_core.pipeline.baseline_fitting import fit_baselines
    from retailsim_core.pipeline.evaluation_run import evaluate
    from retailsim_core.tables import REPORT_TABLE

    split = tiny_warehouse["split"]
    cfg = EvalConfig(
        max_test_samples=120,
        max_valid_samples=150,
        chunk=128,
        bootstrap=50,
        sequential=SequentialConfig(max_epochs=1, max_len=40),
    )
    fit_baselines(warehouse, split, cfg)
    evaluate(warehouse, split, None, cfg)
    folder = warehouse.table_dir(REPORT_TABLE)
    frozen = json.loads((folder / "metrics.json").read_text())["next_basket"]
    assert REFRESHED not in frozen["all"]  # no refreshes yet: the row is left out
    refresh_weeks(warehouse, split, range(11, 14), TrainConfig.preset("tiny"), CFG)
    evaluate(warehouse, split, None, cfg)
    metrics = json.loads((folder / "metrics.json").read_text())["next_basket"]
    bounds = json.loads((folder / "intervals.json").read_text())["next_basket"]
    assert REFRESHED in metrics["all"] and {"week_12", "week_13", "week_14"} <= set(metrics)
    assert metrics["all"]["world_model"] == frozen["all"]["world_model"]
    assert bounds["all"][REFRESHED]["diff_refreshed_R@20"] == [0.0, 0.0]
    assert "diff_refreshed_R@20" in bounds["all"]["TIFU-KNN"]
    tuning = json.loads((folder / "tuning.json").read_text())
    assert tuning["refreshed_weeks"] == [12, 13, 14] and tuning["split"]["train_end"] == 8
    page = (folder / "report.html").read_text()
    assert "Staleness: each test week" in page and "world_model (refreshed)" in page
    scored = tuning["scored_checkpoints"]  # the report is tied to the bytes it scored (D113)
    assert scored["trained"] == ckpt.verified_id(warehouse.table_dir(CHECKPOINT_TABLE))
    assert scored["refreshed"] == {
        str(w): ckpt.verified_id(warehouse.partition_dir(REFRESH_TABLE, w - 1))
        for w in (12, 13, 14)
    }
    assert scored["trained"] in page
    weights = warehouse.partition_dir(REFRESH_TABLE, 12) / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x01
    weights.write_bytes(bytes(data))
    with pytest.raises(ckpt.UnverifiedCheckpointError, match="materialize model_refresh"):
        evaluate(warehouse, split, None, cfg)
