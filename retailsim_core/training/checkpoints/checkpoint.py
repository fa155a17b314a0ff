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
import stat
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import torch
from safetensors.torch import load_file, save_file

from retailsim_core.datasets.tokens import ProductVocab
from retailsim_core.models.world_model import WorldModel, WorldModelConfig
from retailsim_core.storage.io import atomic_write, atomic_write_text, sha256_of

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


def _id_of(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]


def write_manifest(
    folder: Path, names: tuple[str, ...] = DELIVERABLES, extra: dict | None = None
) -> str:
    """Publish the checkpoint: checksums and sizes of its files and an id derived from the
    checksums (written last, atomically, so a reader never sees a half-written checkpoint as a
    new one). ``extra``: more fields of the manifest (what the files were made from)."""
    files = {name: sha256_of(folder / name) for name in names}
    sizes = {name: (folder / name).stat().st_size for name in names}
    checkpoint_id = _id_of(files)
    body = {**(extra or {}), "checkpoint_id": checkpoint_id, "files": files, "bytes": sizes}
    write_json(folder / MANIFEST, body)
    return checkpoint_id


class UnverifiedCheckpointError(FileNotFoundError):
    """A model folder its manifest does not vouch for; the message names the folder, the reason
    and the asset that writes it (a FileNotFoundError: nothing trustworthy is published)."""


@dataclass(frozen=True)
class Verdict:
    """What a reader may trust of a folder: its id, or None and the reason it is refused."""

    checkpoint_id: str | None
    reason: str = ""


def _bounded_sha256(path: Path, size: int) -> str | None:
    """The sha256 of at most ``size`` bytes; None when the file holds more (it grew)."""
    digest, left = hashlib.sha256(), size
    with open(path, "rb") as fh:
        while chunk := fh.read(min(left + 1, 1 << 20)):
            left -= len(chunk)
            if left < 0:
                return None
            digest.update(chunk)
    return digest.hexdigest() if left == 0 else None


def check_manifest(folder: Path, required: tuple[str, ...] = DELIVERABLES) -> Verdict:
    """Trust a published folder only as far as its manifest is checked (D81): it names every
    ``required`` file, each a regular file directly inside ``folder`` (no path, no link, no
    device) of the size it states, whose checksum matches; the id is the one the checksums
    give. Hashing reads at most the stated bytes, so a manifest cannot make a reader hash
    /dev/zero or a file outside the folder."""
    try:
        manifest = read_json(folder / MANIFEST)
        files, claimed = dict(manifest["files"]), str(manifest["checkpoint_id"])
        if "bytes" not in manifest:
            return Verdict(None, "the manifest states no file sizes (an older version wrote it)")
        sizes = dict(manifest["bytes"])
    except FileNotFoundError:
        return Verdict(None, f"{folder / MANIFEST} does not exist")
    except (OSError, ValueError, KeyError, TypeError) as err:
        return Verdict(None, f"{folder / MANIFEST} is not a manifest ({type(err).__name__})")
    missing = [name for name in required if name not in files]
    if missing:
        return Verdict(None, f"the manifest does not name {', '.join(missing)}")
    for name, expected in files.items():
        if not isinstance(name, str) or Path(name).name != name or name in (".", ".."):
            return Verdict(None, f"the manifest names {name!r}, not a file of the folder")
        try:
            info = (folder / name).lstat()
        except OSError:
            return Verdict(None, f"{name} is missing")
        size = sizes.get(name)
        if not stat.S_ISREG(info.st_mode):
            return Verdict(None, f"{name} is not a regular file")
        if not isinstance(size, int) or info.st_size != size:
            return Verdict(None, f"{name} is {info.st_size} bytes, the manifest says {size}")
        if _bounded_sha256(folder / name, size) != expected:
            return Verdict(None, f"the checksum of {name} differs from the manifest's")
    if claimed != _id_of(files):
        return Verdict(None, f"the manifest's id {claimed!r} is not its files' id")
    return Verdict(claimed)


def verified_id(folder: Path, required: tuple[str, ...] = DELIVERABLES) -> str | None:
    """The checkpoint id when ``check_manifest`` trusts the folder, else None."""
    return check_manifest(folder, required).checkpoint_id


def published_id(folder: Path, asset: str, required: tuple[str, ...] = DELIVERABLES) -> str:
    """``verified_id``, or UnverifiedCheckpointError naming the folder, the reason and the
    asset that writes it."""
    verdict = check_manifest(folder, required)
    if verdict.checkpoint_id is None:
        raise UnverifiedCheckpointError(
            f"{folder}: nothing published ({verdict.reason}): materialize {asset}"
        )
    return verdict.checkpoint_id


def load_model(folder: Path, asset: str | None = None) -> tuple[WorldModel, ProductVocab, dict]:
    """Rebuild a trained model from safetensors + JSON only (never unpickling), once its
    manifest vouches for every file (else UnverifiedCheckpointError naming ``asset``, by
    default the folder's table): no reader scores with a damaged model (D113). The returned
    config's ``checkpoint_id`` is the id verified."""
    checkpoint_id = published_id(folder, asset or asset_of(folder))
    config = read_json(folder / "config.json") | {"checkpoint_id": checkpoint_id}
    weights = load_tensors(folder / "model.safetensors")
    cfg = WorldModelConfig(**config["model"])
    model = WorldModel(
        cfg,
        torch.zeros_like(weights["products.products.weight"]),
        config["n_customer_numeric"],
        torch.zeros_like(weights["price_response.substitute_edges"]),
        (
            torch.zeros_like(weights["copurchase.edges"]),
            torch.zeros_like(weights["copurchase.log_lift"]),
        ),
        weights["price_response.category_of"],  # sizes the category responses
    )
    model.load_state_dict(weights)
    # The size head's calibration (D131); a checkpoint from before it has none: the raw head.
    model.size_head.tilt.fill_(config.get("calibration", {}).get("size_tilt", 0.0))
    model.train(False)
    return model, read_vocab(folder), config


def read_vocab(folder: Path) -> ProductVocab:
    """The vocabulary a checkpoint folder was trained with."""
    return ProductVocab(
        tuple(pl.read_parquet(folder / "vocabulary.parquet").sort("token")["product_id"].to_list())
    )


def asset_of(folder: Path) -> str:
    """The asset that writes ``folder``: its name, or its table's for a ``week=`` partition."""
    folder = Path(folder)
    return folder.parent.name if folder.name.startswith("week=") else folder.name
