"""The serving side's reads of the warehouse, in one place: the served weeks' inputs and the
service built from a published checkpoint (``serving/`` itself reads nothing)."""

from __future__ import annotations

import logging
from pathlib import Path

from retailsim_core.datasets.model_inputs import ModelInputs
from retailsim_core.datasets.tensors import TensorConfig
from retailsim_core.demand.world.plan_forecast import DemandInputs
from retailsim_core.next_basket.methods import REFRESHED
from retailsim_core.pipeline.readers.warehouse_inputs import load_model_inputs
from retailsim_core.serving.context import ServingData, served_weeks
from retailsim_core.serving.onnx_scoring import OnnxScorer, scoring_graph_for
from retailsim_core.serving.service import WorldModelService
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import CHECKPOINT_TABLE, ONNX_TABLE, SAMPLES_TABLE, WORLD_DEMAND_TABLE
from retailsim_core.training.checkpoints.checkpoint import load_model, read_json

log = logging.getLogger(__name__)


def checkpoint_weeks(warehouse: Warehouse, checkpoint_config: dict) -> list[int]:
    """The weeks a checkpoint serves (``served_weeks``) in this warehouse."""
    return served_weeks(warehouse.weeks(SAMPLES_TABLE), checkpoint_config)


def load_serving_data(
    warehouse: Warehouse, weeks: list[int], tensor_cfg: TensorConfig
) -> tuple[ServingData, ModelInputs]:
    """What the model reads for any context of ``weeks``, and the inputs it was built from
    (their price features: every cell of ``weeks``, from the inputs' one replay of the shelf
    prices)."""
    inputs = load_model_inputs(warehouse, weeks, every_cell=True)
    data = ServingData.build(inputs, inputs.price_features, weeks, tensor_cfg, warehouse.calendar)
    return data, inputs


def load_service(
    warehouse: Warehouse, checkpoint: Path, report: Path | None = None, onnx: bool = False
) -> WorldModelService:
    """Model, inputs of the weeks after the checkpoint's validation weeks, its evaluation's
    headline metrics when ``report`` (the report folder) has them, and the demand forecast's
    inputs for plans when ``world_model_demand`` has written them. ``onnx``: score next baskets
    with the exported graph when it is this checkpoint's (else PyTorch, said in ``info``)."""
    model, vocab, config = load_model(checkpoint, CHECKPOINT_TABLE)
    checkpoint_id = config["checkpoint_id"]
    weeks = checkpoint_weeks(warehouse, config)
    data, inputs = load_serving_data(warehouse, weeks, TensorConfig(**config["tensors"]))
    if data.vocab != vocab:
        raise ValueError("the checkpoint's vocabulary differs from the warehouse's: retrain")
    categories = inputs.categories
    scorer, note = None, ""
    if onnx:
        scorer, note = _onnx_scorer(warehouse.table_dir(ONNX_TABLE), checkpoint_id)
    evaluation = evaluation_of(report, checkpoint_id) if report else {}
    demand = DemandInputs.read(warehouse.table_dir(WORLD_DEMAND_TABLE))
    return WorldModelService(
        model, vocab, config, data, checkpoint_id, categories, scorer, note, evaluation, demand
    )


def _onnx_scorer(folder: Path, checkpoint_id: str) -> tuple[OnnxScorer | None, str]:
    """The exported graph of this checkpoint when its manifest vouches for it, else PyTorch and
    the reason (a damaged graph is never served; D113)."""
    graph, reason = scoring_graph_for(folder, checkpoint_id)
    if graph is None:
        log.warning("serving with PyTorch, not ONNX: %s", reason)
        return None, f"{reason}: PyTorch"
    return OnnxScorer(graph), ""


def evaluation_of(report: Path, checkpoint_id: str) -> dict:
    """The headline next-basket metrics of the evaluation that scored ``checkpoint_id``; {}
    when the report scored another model or is absent. A damaged report file is optional
    information: a warning naming it, never a service that cannot start or reload (D113)."""
    files = {name: report / f"{name}.json" for name in ("metrics", "tuning")}
    if not all(f.exists() for f in files.values()):
        return {}
    try:
        metrics, tuning = (read_json(f) for f in files.values())
        scored = tuning.get("scored_checkpoints") or {}
        nb = metrics.get("next_basket", {}).get("all", {})
    except (OSError, ValueError, AttributeError) as err:
        log.warning("evaluation not shown: %s or %s is unreadable (%s)", *files.values(), err)
        return {}
    if checkpoint_id == scored.get("trained"):
        shown = ("world_model", "P-TopFreq")
    elif checkpoint_id in (scored.get("refreshed") or {}).values():
        shown = (REFRESHED, "P-TopFreq")  # a refresh: the report's row of the refreshed models
    else:
        return {}  # the report scored other checkpoints: its figures are not this model's
    return {m: nb[m] for m in shown if m in nb}
