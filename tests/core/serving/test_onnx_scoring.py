"""The ONNX scoring graph against PyTorch (the reference) on real serving batches."""

import pytest
import torch

from retailsim_core.serving.onnx_scoring import OnnxScorer, export_onnx

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
