"""The auxiliary heads' calibration: the heads read without a vocabulary-wide slot, and a source
without the labels costs no model pass."""

import numpy as np
import polars as pl
import pytest
import torch

from retailsim_core.models.world_model import AUX_HEADS
from retailsim_core.next_basket.calibration import _aux_probs, aux_calibration
from retailsim_core.pipeline.readers.warehouse_inputs import load_model_inputs
from retailsim_core.report.calibration_section import _reliability
from retailsim_core.training.checkpoints.checkpoint import load_model


@pytest.fixture(scope="module")
def labelled(tiny_checkpoint, tiny_warehouse):
    model, _, _ = load_model(tiny_checkpoint)
    inputs = load_model_inputs(tiny_warehouse["warehouse"])
    data = inputs.training_set(inputs.samples.filter(pl.col("split") == "test").head(20))
    return model, data


def test_the_heads_read_as_in_the_next_basket_pass(labelled):
    model, data = labelled
    rows = np.arange(len(data))
    probs = _aux_probs(model, data, rows, chunk=7)  # chunks do not change a row
    with torch.no_grad():
        out, _ = model.next_basket(data[rows])
    for name in AUX_HEADS:
        torch.testing.assert_close(probs[name], out.aux_logits[name].softmax(-1))
    table = aux_calibration(model, data, rows)
    assert table.height == 10 * len(AUX_HEADS)
    assert table.group_by("head").agg(pl.col("samples").sum())["samples"].max() > 0


def test_without_labels_no_model_pass(labelled):
    _, data = labelled
    basket_labels = data.basket_labels
    try:
        data.basket_labels = np.zeros_like(
            basket_labels
        )  # The Complete Journey: no mission, type or size labels

        class Unused:
            def __getattr__(self, name):
                raise AssertionError("the model ran for a source without labels")

        table = aux_calibration(Unused(), data, np.arange(len(data)))
    finally:
        data.basket_labels = basket_labels
    assert table.height == 10 * len(AUX_HEADS) and table["samples"].sum() == 0
    assert table["majority_accuracy"].null_count() == table.height
    assert table.schema["ece"] == pl.Float64  # a typed column in calibration.parquet
    html = _reliability(table)  # the report says the heads have no labels, it does not fail
    assert html.count("<td>—</td>") == 3 * len(AUX_HEADS) and "<svg" not in html
