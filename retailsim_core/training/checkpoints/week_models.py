"""Each scored week's world model with one model in memory (issue #62).

The evaluation and the world model's demand score each test week with the refresh of the week
before (D111). Holding every refresh at once cost a model per week: ten on The Complete
Journey, about 1 GB. ``WeekModels`` verifies every folder once (D113: no reader scores with a
damaged model), checks its vocabulary, then keeps ONE ``WorldModel`` and loads the asked
week's weights into it when a week is asked for: loading a state dict is a copy of the
weights (tens of milliseconds), building a model is not.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import torch

from retailsim_core.datasets.tokens import ProductVocab
from retailsim_core.models.world_model import WorldModel
from retailsim_core.training.checkpoints.checkpoint import (
    asset_of,
    load_model,
    load_tensors,
    published_id,
    read_vocab,
)


class WeekModels(Mapping[int, WorldModel]):
    """week -> the model of ``folders[week]``. Every value is the same object, holding the
    weights of the week asked for last: use a value before asking for another week."""

    def __init__(self, folders: Mapping[int, Path], vocab: ProductVocab):
        self._folders = {int(w): Path(f) for w, f in folders.items()}
        distinct = sorted(set(self._folders.values()))
        self._model: WorldModel | None = None
        self._loaded: Path | None = None
        ids, self._stats = {}, {}
        if distinct:  # the first is built (and verified) by load_model, the rest verified here
            with torch.random.fork_rng():  # building a model draws; the caller's draws stay
                self._model, first_vocab, config = load_model(distinct[0])
            self._loaded, ids[distinct[0]] = distinct[0], config["checkpoint_id"]
        for folder in distinct:
            if folder not in ids:
                ids[folder] = published_id(folder, asset_of(folder))
            if (first_vocab if folder == distinct[0] else read_vocab(folder)) != vocab:
                raise ValueError(f"{folder}: another vocabulary than the warehouse's: retrain")
            self._stats[folder] = _stat(folder)
        self.ids = {w: ids[f] for w, f in self._folders.items()}  # each week's verified id

    def __getitem__(self, week: int) -> WorldModel:
        folder = self._folders[int(week)]
        if folder != self._loaded:
            if _stat(folder) != self._stats[folder]:  # rewritten since it was verified
                raise ValueError(f"{folder} changed while it was being scored: score again")
            self._model.load_state_dict(load_tensors(folder / "model.safetensors"))
            self._loaded = folder
        return self._model

    def __iter__(self) -> Iterator[int]:
        return iter(self._folders)

    def __len__(self) -> int:
        return len(self._folders)


def _stat(folder: Path) -> tuple[int, int]:
    info = (folder / "model.safetensors").stat()
    return info.st_size, info.st_mtime_ns
