"""One model in memory for every scored week: each week gets its own folder's weights, checked
once, and a folder rewritten after its check is refused."""

import shutil

import pytest
import torch


def _published_copy(source, folder, scale: float):
    from retailsim_core.training.checkpoints.checkpoint import (
        load_tensors,
        save_tensors,
        write_manifest,
    )

    shutil.copytree(source, folder)
    weights = load_tensors(folder / "model.safetensors")
    weights["products.products.weight"] = weights["products.products.weight"] * scale
    save_tensors(folder / "model.safetensors", weights)
    write_manifest(folder)
    return folder


def test_each_week_is_scored_with_its_own_weights_by_one_model(tiny_checkpoint, tmp_path):
    from retailsim_core.training.checkpoints.checkpoint import load_model
    from retailsim_core.training.checkpoints.week_models import WeekModels

    a = _published_copy(tiny_checkpoint, tmp_path / "refresh" / "week=a", 1.0)
    b = _published_copy(tiny_checkpoint, tmp_path / "refresh" / "week=b", 2.0)
    reference = {w: load_model(f)[0].state_dict() for w, f in ((12, a), (13, b), (14, a))}
    vocab = load_model(a)[1]
    draws = torch.random.get_rng_state()
    models = WeekModels({12: a, 13: b, 14: a}, vocab)
    assert torch.equal(torch.random.get_rng_state(), draws)  # building drew nothing of ours
    assert sorted(models) == [12, 13, 14] and len(models) == 3
    assert models.ids[12] == models.ids[14] != models.ids[13]
    for week in (13, 12, 14, 13):
        got = models[week].state_dict()
        assert all(torch.equal(got[k], reference[week][k]) for k in got), week
    assert models[12] is models[13]  # one model in memory

    _published_copy(tiny_checkpoint, tmp_path / "later", 3.0)  # a folder rewritten after its check
    shutil.copy(tmp_path / "later" / "model.safetensors", a / "model.safetensors")
    models[13]
    with pytest.raises(ValueError, match="changed while it was being scored"):
        models[12]


def test_a_model_of_another_vocabulary_is_refused(tiny_checkpoint, tmp_path):
    from retailsim_core.datasets.tokens import ProductVocab
    from retailsim_core.training.checkpoints.week_models import WeekModels

    a = _published_copy(tiny_checkpoint, tmp_path / "week=a", 1.0)
    with pytest.raises(ValueError, match="another vocabulary"):
        WeekModels({12: a}, ProductVocab(("P1", "P2")))
