"""``onnx_scoring_graph``: the trained checkpoint's next-basket scoring graph in ONNX, exported
with a real serving batch of the first served week and checked against PyTorch on it."""

from __future__ import annotations

from pathlib import Path

from retailsim_core.datasets.tensors import TensorConfig
from retailsim_core.pipeline.readers.serving_inputs import checkpoint_weeks, load_serving_data
from retailsim_core.serving.onnx_scoring import write_scoring_graph
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import CHECKPOINT_TABLE, ONNX_TABLE
from retailsim_core.training.checkpoints.checkpoint import load_model

EXAMPLE_CONTEXTS = 16


def export_checkpoint_graph(warehouse: Warehouse, checkpoint: Path | None = None) -> dict:
    """Write ``onnx_scoring_graph`` for the (published) checkpoint; returns its manifest."""
    checkpoint = checkpoint or warehouse.table_dir(CHECKPOINT_TABLE)
    model, _, config = load_model(checkpoint, CHECKPOINT_TABLE)
    tensor_cfg = TensorConfig(**config["tensors"])
    data, _ = load_serving_data(warehouse, checkpoint_weeks(warehouse, config)[:1], tensor_cfg)
    contexts = data.sample_contexts(EXAMPLE_CONTEXTS, seed=0)
    batch = data.batch(contexts, history_width=tensor_cfg.max_history_trips)
    return write_scoring_graph(
        warehouse.table_dir(ONNX_TABLE), model, batch, config["checkpoint_id"]
    )
