"""tuned_baselines: fitted once without the world model, read back exactly, refused when stale."""

import dataclasses
import json
import shutil

import numpy as np
import pytest

from retailsim_core.baselines import counting as bl
from retailsim_core.baselines import neighbour_baselines as nb
from retailsim_core.baselines.sequential import SequentialConfig, sequential_scores
from retailsim_core.models.world_model import WorldModelConfig
from retailsim_core.next_basket.eval_config import EvalConfig
from retailsim_core.next_basket.tuned_folder import TUNING_FILE, fit_key, load_baselines
from retailsim_core.next_basket.tuning import tifu_grid_scores, tifu_scores, upcf_scores
from retailsim_core.pipeline.baseline_fitting import fit_baselines
from retailsim_core.pipeline.evaluation_run import load_tasks
from retailsim_core.pipeline.world_model_training import train_world_model
from retailsim_core.tables import CHECKPOINT_TABLE
from retailsim_core.training.run.train_config import TrainConfig
from retailsim_core.training.scoring.metrics import next_basket_metrics, truth_matrix

CFG = EvalConfig(
    max_test_samples=200,
    max_valid_samples=120,
    chunk=128,
    bootstrap=50,
    sequential=SequentialConfig(max_epochs=2, max_len=40),
)


@pytest.fixture(scope="module")
def fitted(tiny_warehouse, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tuned") / "tuned_baselines"
    record = fit_baselines(tiny_warehouse["warehouse"], tiny_warehouse["split"], CFG, folder=folder)
    tasks = load_tasks(tiny_warehouse["warehouse"], tiny_warehouse["split"], CFG, with_model=False)
    return folder, record, tasks


@pytest.mark.slow
def test_the_baselines_see_the_same_baskets_with_or_without_a_checkpoint(tiny_warehouse, fitted):
    """The tuning reads no checkpoint: its tensors default, and no baseline reads what differs."""
    wh, split = tiny_warehouse["warehouse"], tiny_warehouse["split"]
    if not (wh.table_dir(CHECKPOINT_TABLE) / "model.safetensors").exists():
        train_world_model(wh, split, WorldModelConfig.preset("tiny"), TrainConfig.preset("tiny"))
    with_model, without = load_tasks(wh, split, CFG), fitted[2]
    assert without.model is None and with_model.model is not None
    for name in ("full_hist_start", "hist_end", "trip_day", "trip_customer", "trip_tokens"):
        np.testing.assert_array_equal(getattr(with_model.data, name), getattr(without.data, name))
    np.testing.assert_array_equal(with_model.valid_rows, without.valid_rows)
    np.testing.assert_array_equal(with_model.test_rows, without.test_rows)
    assert (with_model.trips != without.trips).nnz == 0
    assert fit_key(with_model, CFG) == fit_key(without, CFG) == fitted[1].fit_key


def test_a_loaded_fit_reproduces_every_validation_figure(fitted):
    folder, record, tasks = fitted
    tuned = load_baselines(folder, tasks, CFG)
    rows, day, pop = tasks.valid_rows, tasks.valid_day, tasks.popularity["valid"]
    tifu_pool = nb.tifu_pool(tasks.data, tasks.trips, day)
    upcf_pool = nb.upcf_pool(tasks.data, tasks.trips, day)
    figures = {
        "TIFU-KNN": tifu_scores(tasks, tifu_pool, tuned.tifu, rows),
        "UP-CF@r": upcf_scores(tasks, upcf_pool, pop, tuned.upcf, rows),
        "SASRec": sequential_scores(tuned.sasrec, tasks.data, rows, CFG.sequential.seed),
        "BERT4Rec": sequential_scores(tuned.bert4rec, tasks.data, rows, CFG.sequential.seed),
    }
    for method, scores in figures.items():
        assert tasks.validation_recall(scores, rows) == pytest.approx(
            record.info[method]["valid_R@20"], abs=1e-12
        ), method
    assert tuned.bert4rec.cfg.kind == "bert4rec" and tuned.sasrec.cfg.kind == "sasrec"
    assert tuned.copurchase_weight in CFG.copurchase_weights
    assert json.loads(json.dumps(tuned.info)) == record.info


def test_the_tifu_grid_scores_each_config_as_alone(fitted):
    """The grid shares vectors between configs with the same decays, and only between them."""
    tasks = fitted[2]
    rows = tasks.valid_rows
    pool = nb.tifu_pool(tasks.data, tasks.trips, tasks.valid_day)
    configs = [
        nb.TifuConfig(m, rb, 0.8, k, a) for m in (2, 5) for rb in (0.5, 1.0) for k, a in [(3, 0.6)]
    ] + [nb.TifuConfig(2, 0.5, 0.8, 7, 0.9)]
    got = dict(tifu_grid_scores(tasks, pool, configs, rows))
    assert set(got) == set(configs)
    assert not got[configs[0]].equal(got[configs[1]])  # the decays matter on this data
    for c, s in got.items():
        assert s.equal(tifu_scores(tasks, pool, c, rows)), c


def test_the_tuning_recall_is_the_reports_recall_at_20(fitted):
    """Tuning reads R@20 alone; it is next_basket_metrics' R@20 (the report's), to the bit."""
    tasks = fitted[2]
    rows, data = tasks.valid_rows, tasks.data
    scores = bl.p_topfreq(bl.personal_counts(data, rows, tasks.trips))
    truth = truth_matrix(
        data.item_tokens, data.item_starts[rows], data.item_counts[rows], data.vocab.size
    )
    full = next_basket_metrics(
        scores,
        truth,
        repeat=tasks.context["repeat_of"](rows),
        basket_len=tasks.context["basket_len"][rows],
        categories=tasks.categories,
        outside=data.item_oov[rows],
    )
    assert 0 < tasks.validation_recall(scores, rows) == float(full["R@20"].mean())


def test_a_stale_or_altered_fit_is_refused_naming_the_asset(fitted, tmp_path):
    folder, _, tasks = fitted
    other_settings = dataclasses.replace(CFG, copurchase_weights=(1.0, 3.0))
    with pytest.raises(ValueError, match="materialize tuned_baselines again"):
        load_baselines(folder, tasks, other_settings)
    fewer = dataclasses.replace(tasks, valid_rows=tasks.valid_rows[:-1])  # other baskets
    with pytest.raises(ValueError, match="materialize tuned_baselines again"):
        load_baselines(folder, fewer, CFG)
    altered = tmp_path / "tuned_baselines"
    shutil.copytree(folder, altered)
    tuning = json.loads((altered / TUNING_FILE).read_text())
    tuning["copurchase_weight"] = 4.0  # an edit the manifest did not publish
    (altered / TUNING_FILE).write_text(json.dumps(tuning))
    with pytest.raises(FileNotFoundError, match="materialize tuned_baselines"):
        load_baselines(altered, tasks, CFG)
    with pytest.raises(FileNotFoundError, match="materialize tuned_baselines"):
        load_baselines(tmp_path / "absent", tasks, CFG)
