"""The size head calibrated on validation baskets (D131): the calibrated expected size is their
real mean; the checkpoint carries the tilt and loading sets it."""

import numpy as np
import pytest
import torch


def test_the_calibrated_head_says_the_validation_baskets_mean_size(tiny_warehouse, tiny_checkpoint):
    from retailsim_core.next_basket.eval_config import EvalConfig
    from retailsim_core.pipeline.evaluation_run import load_tasks
    from retailsim_core.training.adapt.size_calibration import calibrate_size

    wh, split = tiny_warehouse["warehouse"], tiny_warehouse["split"]
    tasks = load_tasks(wh, split, EvalConfig(), tiny_checkpoint)
    model, data = tasks.model, tasks.data
    rows = np.arange(len(data))
    real = np.minimum(data.item_counts + data.item_oov, model.cfg.max_items)[rows]
    figures = calibrate_size(model, data, seed=0, chunk=17)
    assert figures["contexts"] == len(rows) and figures["real_mean_size"] == real.mean()
    assert figures["calibrated_mean_size"] == pytest.approx(real.mean(), rel=1e-4)
    with torch.no_grad():  # the model now says it, through the inference path
        logits = model.next_basket(data[rows])[0].size_logits.double()
    sizes = torch.softmax(logits, -1) @ torch.arange(1.0, logits.shape[1] + 1).double()
    assert float(sizes.mean()) == pytest.approx(real.mean(), rel=1e-3)
    model.size_head.tilt.fill_(0.0)  # the session's model: back as it was loaded


def test_a_checkpoint_carries_its_tilt(tiny_checkpoint):
    from retailsim_core.tables import CHECKPOINT_TABLE
    from retailsim_core.training.checkpoints.checkpoint import load_model, read_json

    config = read_json(tiny_checkpoint / "config.json")
    model, _, _ = load_model(tiny_checkpoint, CHECKPOINT_TABLE)
    tilt = config["calibration"]["size_tilt"]
    assert float(model.size_head.tilt) == pytest.approx(tilt)
    calibration = config["calibration"]
    assert calibration["calibrated_mean_size"] == pytest.approx(
        calibration["real_mean_size"], rel=1e-4
    )
