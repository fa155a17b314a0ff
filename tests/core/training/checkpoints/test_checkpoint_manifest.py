"""A checkpoint is published by its manifest: an id derived from its files' checksums."""

import json
import re

import pytest
import torch

from retailsim_core.storage.io import sha256_of
from retailsim_core.training.checkpoints.checkpoint import (
    check_manifest,
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


def _forge(folder, **fields):
    """A manifest edited by hand: whatever it claims, with the real files' entries as a base."""
    manifest = json.loads((folder / "manifest.json").read_text()) | fields
    (folder / "manifest.json").write_text(json.dumps(manifest))


def test_a_forged_manifest_is_refused_with_its_reason(tmp_path):
    _files(tmp_path, 1.0)
    good = write_manifest(tmp_path)
    real = json.loads((tmp_path / "manifest.json").read_text())
    outside = tmp_path.parent / "outside.txt"
    outside.write_text("not the checkpoint's")
    outside_sha = sha256_of(outside)
    cases = {
        "does not name model.safetensors": {"files": {}, "bytes": {}},
        "not a file of the folder": {
            "files": real["files"] | {"../outside.txt": outside_sha},
            "bytes": real["bytes"] | {"../outside.txt": outside.stat().st_size},
        },
        "'/dev/zero', not a file": {
            "files": real["files"] | {"/dev/zero": "0" * 64},
            "bytes": real["bytes"] | {"/dev/zero": 10},
        },
        "is not its files' id": {"checkpoint_id": "0123456789abcdef"},
        "the manifest says 1": {"bytes": real["bytes"] | {"model.safetensors": 1}},
        "no file sizes": {"bytes": None},
    }
    for reason, fields in cases.items():
        write_manifest(tmp_path)
        if fields.get("bytes", 0) is None:
            manifest = dict(real)
            del manifest["bytes"]
            (tmp_path / "manifest.json").write_text(json.dumps(manifest))
        else:
            _forge(tmp_path, **fields)
        verdict = check_manifest(tmp_path)
        assert verdict.checkpoint_id is None and reason in verdict.reason, (reason, verdict)
        with pytest.raises(FileNotFoundError, match=re.escape(verdict.reason)):
            published_id(tmp_path, "trained_checkpoint")
    assert write_manifest(tmp_path) == good == verified_id(tmp_path)


def test_links_and_devices_inside_the_folder_are_not_hashed(tmp_path):
    """A link named like a deliverable (to /dev/zero: hashing it never ends) is refused."""
    _files(tmp_path, 1.0)
    write_manifest(tmp_path, ("model.safetensors", "config.json", "vocabulary.parquet"))
    real = json.loads((tmp_path / "manifest.json").read_text())
    (tmp_path / "zero").symlink_to("/dev/zero")
    _forge(
        tmp_path,
        files=real["files"] | {"zero": "0" * 64},
        bytes=real["bytes"] | {"zero": 1 << 40},
    )
    assert "zero is not a regular file" in check_manifest(tmp_path).reason


def test_a_file_that_grew_past_its_stated_size_is_not_hashed_past_it(tmp_path):
    _files(tmp_path, 1.0)
    write_manifest(tmp_path)
    with open(tmp_path / "config.json", "a") as fh:
        fh.write(" " * 10)
    assert "config.json is" in check_manifest(tmp_path).reason
