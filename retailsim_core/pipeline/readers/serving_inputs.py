"""The serving side's reads of the warehouse, in one place: the served weeks' inputs and the
service built from a published checkpoint (``serving/`` itself reads nothing)."""

from __future__ import annotations

from pathlib import Path

from retailsim_core.datasets.model_inputs import ModelInputs
from retailsim_core.datasets.tensors import PRICE_COLUMNS, TensorConfig
from retailsim_core.pipeline.readers.price_reader import read_price_features
from retailsim_core.pipeline.readers.warehouse_inputs import load_model_inputs
from retailsim_core.serving.context import ServingData, served_weeks
from retailsim_core.serving.onnx_scoring import OnnxScorer, scoring_graph_for
from retailsim_core.serving.service import WorldModelService
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import CHECKPOINT_TABLE, ONNX_TABLE, SAMPLES_TABLE
from retailsim_core.training.checkpoint import load_model, published_id, read_json


def checkpoint_weeks(warehouse: Warehouse, checkpoint_config: dict) -> list[int]:
    """The weeks a checkpoint serves (``served_weeks``) in this warehouse."""
    return served_weeks(warehouse.weeks(SAMPLES_TABLE), checkpoint_config)


def load_serving_data(
    warehouse: Warehouse, weeks: list[int], tensor_cfg: TensorConfig
) -> tuple[ServingData, ModelInputs]:
    """What the model reads for any context of ``weeks``, and the inputs it was built from."""
    inputs = load_model_inputs(warehouse, weeks)
    prices = read_price_features(
        warehouse, weeks, columns=("product_id", "store_id", "week", *PRICE_COLUMNS)
    )
    data = ServingData.build(inputs, prices, weeks, tensor_cfg, warehouse.calendar)
    return data, inputs


def load_service(
    warehouse: Warehouse, checkpoint: Path, report: Path | None = None, onnx: bool = False
) -> WorldModelService:
    """Model, inputs of the weeks after the checkpoint's validation weeks, and its evaluation's
    headline metrics when ``report`` (the report folder) has them. ``onnx``: score next baskets
    with the exported graph when it is this checkpoint's (else PyTorch, said in ``info``)."""
    checkpoint_id = published_id(checkpoint, CHECKPOINT_TABLE)
    model, vocab, config = load_model(checkpoint)
    weeks = checkpoint_weeks(warehouse, config)
    data, inputs = load_serving_data(warehouse, weeks, TensorConfig(**config["tensors"]))
    if data.vocab != vocab:
        raise ValueError("the checkpoint's vocabulary differs from the warehouse's: retrain")
    categories = inputs.categories
    scorer, note = None, ""
    if onnx:
        graph = scoring_graph_for(warehouse.table_dir(ONNX_TABLE), checkpoint_id)
        scorer = OnnxScorer(graph) if graph is not None else None
        note = "" if graph else f"no {ONNX_TABLE} of this checkpoint: PyTorch"
    evaluation = {}
    metrics = (report / "metrics.json") if report else None
    if metrics is not None and metrics.exists():
        nb = read_json(metrics).get("next_basket", {}).get("all", {})
        evaluation = {m: nb[m] for m in ("world_model", "P-TopFreq") if m in nb}
    return WorldModelService(
        model, vocab, config, data, checkpoint_id, categories, scorer, note, evaluation
    )
