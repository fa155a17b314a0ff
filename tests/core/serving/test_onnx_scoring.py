"""The ONNX scoring graph against PyTorch (the reference) on real serving batches."""

import logging
import shutil

import pytest
import torch

from retailsim_core.pipeline.readers.serving_inputs import load_service
from retailsim_core.serving.onnx_scoring import (
    GRAPH_FILE,
    OnnxScorer,
    export_onnx,
    scoring_graph_for,
    write_scoring_graph,
)
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import CHECKPOINT_TABLE, ONNX_TABLE

pytestmark = pytest.mark.slow  # exports the scoring graph


@pytest.fixture(scope="module")
def contexts(tiny_service):
    return tiny_service.data.sample_contexts(40, seed=0, new_share=0.2), None


@pytest.fixture(scope="module")
def scorer(tiny_service, contexts, tmp_path_factory):
    frame, _ = contexts
    width = tiny_service.data.tensor_cfg.max_history_trips
    path = tmp_path_factory.mktemp("onnx") / "scoring.onnx"
    export_onnx(tiny_service.model, tiny_service.data.batch(frame[:3], width), path)
    return OnnxScorer(path)


@pytest.mark.parametrize("rows", [slice(0, 1), slice(0, 7), slice(3, 40)])
def test_onnx_scores_match_pytorch_within_1e4(tiny_service, contexts, scorer, rows):
    frame, _ = contexts
    batch = tiny_service.data.batch(frame[rows], tiny_service.data.tensor_cfg.max_history_trips)
    with torch.no_grad():
        _, expected = tiny_service.model.next_basket(batch)
    got = scorer(batch)
    assert got.shape == expected.shape
    assert float((got - expected).abs().max()) <= 1e-4
    assert batch["cold_start"].any()  # new customers are in the batch too


def test_the_export_leaves_the_model_as_it_was(tiny_service, contexts, scorer):
    assert tiny_service.model.encoder.scan == tiny_service.model.cfg.scan
    assert not tiny_service.model.training


@pytest.fixture(scope="module")
def published(tiny_service, contexts, tmp_path_factory):
    """A published scoring graph (file + manifest) of the tiny service's checkpoint."""
    frame, _ = contexts
    folder = tmp_path_factory.mktemp("onnx_scoring_graph")
    batch = tiny_service.data.batch(frame[:3], tiny_service.data.tensor_cfg.max_history_trips)
    write_scoring_graph(folder, tiny_service.model, batch, tiny_service.checkpoint_id)
    return folder


def test_a_graph_is_served_only_when_its_manifest_vouches_for_it(tiny_service, published, tmp_path):
    graph, reason = scoring_graph_for(published, tiny_service.checkpoint_id)
    assert graph == published / GRAPH_FILE and reason == ""
    assert scoring_graph_for(published, "0" * 16)[0] is None  # another checkpoint's graph
    damaged = tmp_path / "graph"
    shutil.copytree(published, damaged)
    data = bytearray((damaged / GRAPH_FILE).read_bytes())
    data[len(data) // 2] ^= 0x01  # same size, still a readable protobuf in most places
    (damaged / GRAPH_FILE).write_bytes(bytes(data))
    graph, reason = scoring_graph_for(damaged, tiny_service.checkpoint_id)
    assert graph is None and "checksum" in reason and str(damaged) in reason


def test_a_damaged_graph_falls_back_to_pytorch_and_says_so(
    tiny_warehouse, tiny_checkpoint, published, tmp_path, caplog
):
    root = tmp_path / "wh"
    shutil.copytree(tiny_warehouse["warehouse"].root, root)
    warehouse = Warehouse(root)
    folder = warehouse.table_dir(ONNX_TABLE)
    shutil.copytree(published, folder, dirs_exist_ok=True)
    checkpoint = warehouse.table_dir(CHECKPOINT_TABLE)
    assert load_service(warehouse, checkpoint, onnx=True).info()["scoring"] == "onnxruntime"
    (folder / GRAPH_FILE).write_bytes((folder / GRAPH_FILE).read_bytes()[:-1] + b"\x00")
    with caplog.at_level(logging.WARNING):
        service = load_service(warehouse, checkpoint, onnx=True)
    info = service.info()
    assert info["scoring"] == "pytorch" and "not trusted" in info["scoring_note"]
    assert "serving with PyTorch, not ONNX" in caplog.text
