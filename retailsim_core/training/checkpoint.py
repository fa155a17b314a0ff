"""Checkpoints as safetensors + JSON (no Python object serialisation): model weights and, for
resuming training, the optimizer moments, the best weights so far and the loop's counters.

Layout of a checkpoint folder:
    model.safetensors   weights (the deliverable; ``load_model`` reads only this + config.json)
    config.json         model config, vocabulary size, T1 width, training config, metrics
    state.safetensors   resume state: ``optim.<param>.<moment>``, ``best.<weight>``
    state.json          resume counters (phase, epoch, best metric, patience, history)
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from retailsim_core.io import atomic_write, atomic_write_text


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
