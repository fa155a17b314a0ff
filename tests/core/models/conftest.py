"""The tiny world's inputs, training set and an untrained tiny-preset model, per module."""

import numpy as np
import pytest

from retailsim_core.models.world_model import WorldModelConfig
from retailsim_core.pipeline.readers.warehouse_inputs import load_model_inputs
from retailsim_core.training.run.model_setup import build_model

CFG = WorldModelConfig.preset("tiny")


@pytest.fixture(scope="module")
def tiny(tiny_warehouse):
    inputs = load_model_inputs(tiny_warehouse["warehouse"])
    data = inputs.training_set(inputs.samples)
    model = build_model(CFG, inputs.product_table, data.customer_numeric.shape[1], seed=0).eval()
    return inputs, data, model


def rows_with_history(data, n=6):
    h = data.hist_end - data.hist_start
    return list(np.flatnonzero(h > 2)[:n])
