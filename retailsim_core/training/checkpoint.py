"""Checkpoints as safetensors + JSON (no Python object serialisation): model weights and, for
resuming training, the optimizer moments, the best weights so far and the loop's counters.

Layout of a checkpoint folder:
    model.safetensors   weights (the deliverable; ``load_model`` reads only this + config.json)
    config.json         model config, vocabulary size, T1 width, training config, metrics
    state.safetensors   resume state: ``optim.<param>.<moment>``, ``best.<weight>``
    state.json          resume counters (phase, epoch, best metric, patience, history)
    manifest.json       written last: sha256 of the deliverable files and the checkpoint id;
                        a reader (the serving app) trusts a checkpoint only when they match
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import torch
from safetensors.torch import load_file, save_file

from retailsim_core.models.world_model import WorldModel, WorldModelConfig
from retailsim_core.storage.io import atomic_write, atomic_write_text, sha256_of
from retailsim_core.training_data.tokens import ProductVocab

MANIFEST = "manifest.json"
DELIVERABLES = ("model.safetensors", "config.json", "vocabulary.parquet")


def save_tensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    clean = {k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}
    atomic_write(path, lambda tmp: save_file(clean, str(tmp)))


def load_tensors(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path))


def write_json(path: Path, obj: dict) -> None:
    atomic_write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", path)


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def optimizer_tensors(
    optimizer: torch.optim.Optimizer,
) -> tuple[dict[str, torch.Tensor], list[dict]]:
    """AdamW state as flat tensors plus JSON-able param groups."""
    state = optimizer.state_dict()
    tensors = {
        f"optim.{idx}.{name}": value if torch.is_tensor(value) else torch.tensor(value)
        for idx, moments in state["state"].items()
        for name, value in moments.items()
    }
    return tensors, state["param_groups"]


def restore_optimizer(
    optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], groups: list[dict]
) -> None:
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        if key.startswith("optim."):
            _, idx, name = key.split(".", 2)
            state.setdefault(int(idx), {})[name] = value
    for group in groups:
        if "betas" in group:
            group["betas"] = tuple(group["betas"])
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def write_manifest(folder: Path, names: tuple[str, ...] = DELIVERABLES) -> str:
    """Publish the checkpoint: checksums of its files and an id derived from them (written
    last, atomically, so a reader never sees a half-written checkpoint as a new one)."""
    files = {name: sha256_of(folder / name) for name in names}
    checkpoint_id = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]
    write_json(folder / MANIFEST, {"checkpoint_id": checkpoint_id, "files": files})
    return checkpoint_id


def verified_id(folder: Path) -> str | None:
    """The checkpoint id when the manifest exists and every file matches it, else None."""
    try:
        manifest = read_json(folder / MANIFEST)
        ok = all(sha256_of(folder / n) == h for n, h in manifest["files"].items())
    except (OSError, ValueError, KeyError):
        return None
    return manifest["checkpoint_id"] if ok else None


def published_id(folder: Path, asset: str) -> str:
    """``verified_id``, or FileNotFoundError naming the folder and the asset that writes it."""
    checkpoint_id = verified_id(folder)
    if checkpoint_id is None:
        raise FileNotFoundError(
            f"{folder}: nothing published (manifest missing or its checksums differ): "
            f"materialize {asset}"
        )
    return checkpoint_id


def load_model(folder: Path) -> tuple[WorldModel, ProductVocab, dict]:
    """Rebuild a trained model from safetensors + JSON only (never unpickling)."""
    config = read_json(folder / "config.json")
    weights = load_tensors(folder / "model.safetensors")
    cfg = WorldModelConfig(**config["model"])
    model = WorldModel(
        cfg,
        torch.zeros_like(weights["products.products.weight"]),
        config["n_t1_numeric"],
        torch.zeros_like(weights["price_response.substitute_edges"]),
        (
            torch.zeros_like(weights["copurchase.edges"]),
            torch.zeros_like(weights["copurchase.log_lift"]),
        ),
    )
    model.load_state_dict(weights)
    model.train(False)
    vocab = ProductVocab(
        tuple(pl.read_parquet(folder / "vocabulary.parquet").sort("token")["product_id"].to_list())
    )
    return model, vocab, config
