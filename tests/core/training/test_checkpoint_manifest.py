"""A checkpoint is published by its manifest: an id derived from its files' checksums."""

import pytest
import torch

from retailsim_core.training.checkpoint import (
    published_id,
    save_tensors,
    verified_id,
    write_json,
    write_manifest,
)


def _files(folder, value):
    save_tensors(folder / "model.safetensors", {"w": torch.full((2,), value)})
    write_json(folder / "config.json", {"model": {}})
    (folder / "vocabulary.parquet").write_bytes(b"not read here")


def test_the_id_follows_the_files_and_a_changed_file_unpublishes(tmp_path):
    assert verified_id(tmp_path) is None
    with pytest.raises(FileNotFoundError, match="materialize trained_checkpoint"):
        published_id(tmp_path, "trained_checkpoint")
    _files(tmp_path, 1.0)
    first = write_manifest(tmp_path)
    assert verified_id(tmp_path) == published_id(tmp_path, "x") == first and len(first) == 16
    _files(tmp_path, 2.0)  # new weights, manifest not yet rewritten: a half-written checkpoint
    assert verified_id(tmp_path) is None
    second = write_manifest(tmp_path)
    assert second != first and verified_id(tmp_path) == second
    _files(tmp_path, 1.0)
    assert write_manifest(tmp_path) == first  # same bytes, same id
