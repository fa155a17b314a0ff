"""No reader uses a model its manifest does not vouch for (D113): ``load_model`` checks the
folder first and says which folder, why, and which asset writes it."""

import shutil

import pytest

from retailsim_core.training.checkpoints.checkpoint import (
    UnverifiedCheckpointError,
    load_model,
    verified_id,
)


@pytest.fixture()
def folder(tiny_checkpoint, tmp_path):
    copy = tmp_path / "trained_checkpoint"
    shutil.copytree(tiny_checkpoint, copy)
    return copy


def _flip_byte(path, at=None):
    data = bytearray(path.read_bytes())
    at = len(data) // 2 if at is None else at
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_trusted_folder_loads_with_its_verified_id(folder):
    _, _, config = load_model(folder)
    assert config["checkpoint_id"] == verified_id(folder) and len(config["checkpoint_id"]) == 16


@pytest.mark.parametrize(
    "damage",
    [
        lambda f: _flip_byte(f / "model.safetensors"),  # same size, one bit
        lambda f: (f / "config.json").write_text((f / "config.json").read_text()[:40]),
        lambda f: (f / "vocabulary.parquet").write_bytes(b"PAR1"),
        lambda f: (f / "manifest.json").unlink(),
    ],
    ids=["flipped-weight-byte", "truncated-config", "truncated-vocabulary", "no-manifest"],
)
def test_a_damaged_folder_is_refused_naming_it_and_its_asset(folder, damage):
    damage(folder)
    with pytest.raises(UnverifiedCheckpointError, match="materialize trained_checkpoint") as err:
        load_model(folder)
    assert str(folder) in str(err.value)


def test_a_weekly_partition_names_its_table(folder, tmp_path):
    week = tmp_path / "model_refresh" / "week=2006-04-10"
    shutil.copytree(folder, week)
    _flip_byte(week / "model.safetensors")
    with pytest.raises(UnverifiedCheckpointError, match="materialize model_refresh"):
        load_model(week)
