"""The ``tuned_baselines`` folder (D68): its files, the fit key that ties it to the samples it
was tuned on, and loading it. ``pipeline/baseline_fitting.py`` tunes and writes it; the
evaluation reads it through ``load_baselines``. The folder holds

    tuning.json          the chosen configurations, their validation figures and the fit key
    sasrec.safetensors   SASRec weights (its config is in tuning.json)
    bert4rec.safetensors BERT4Rec weights
    manifest.json        checksums of the three files, written last

The fit key digests everything the choice depends on (the vocabulary, the validation baskets,
every trip, the evaluation's tuning settings); ``load_baselines`` refuses a folder whose key
differs from the tasks', naming the asset to materialize again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from retailsim_core.baselines import neighbour_baselines as nb
from retailsim_core.baselines.sequential import SequentialConfig, SequentialRecommender
from retailsim_core.next_basket.eval_config import EvalConfig
from retailsim_core.next_basket.tasks import EvalTasks
from retailsim_core.next_basket.tuning import TunedBaselines
from retailsim_core.tables import BASELINES_TABLE
from retailsim_core.training.checkpoints import checkpoint as ckpt

TUNING_FILE = "tuning.json"
WEIGHTS = {"sasrec": "sasrec.safetensors", "bert4rec": "bert4rec.safetensors"}
FILES = (TUNING_FILE, *WEIGHTS.values())


@dataclass(frozen=True)
class TuningRecord:
    """tuning.json: what was chosen on validation weeks, and for which data (field order is the
    file's key order)."""

    fit_key: str  # ``fit_key`` of the tasks it was tuned on
    split: dict  # train_end, valid_end
    vocab_size: int
    validation_samples: int
    tifu: dict  # the chosen TifuConfig
    upcf: dict  # the chosen UpcfConfig
    copurchase_weight: float
    info: dict  # per method: its validation figures, epochs, what stopped it
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def fit_key(tasks: EvalTasks, cfg: EvalConfig) -> str:
    """Digest of what the tuning reads: vocabulary, validation baskets, trips, tuning settings."""
    data = tasks.data
    h = hashlib.sha256()
    for part in (
        data.vocab.products,
        tasks.samples["basket_id"].to_numpy()[tasks.valid_rows].tolist(),
        [tasks.valid_day, tasks.test_day],
        [asdict(cfg.tifu), asdict(cfg.upcf), asdict(cfg.sequential)],
        [cfg.copurchase_weights, cfg.mask_rate, cfg.chunk, cfg.seed],
    ):
        h.update(json.dumps(part, default=str).encode())
    for array in (data.trip_offsets, data.trip_tokens, data.trip_day, data.trip_customer):
        h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()[:16]


def load_baselines(folder: Path, tasks: EvalTasks, cfg: EvalConfig) -> TunedBaselines:
    """The tuned baselines of ``folder``, checked against the warehouse ``tasks`` were read from:
    a missing, corrupt or stale folder is an error naming the asset to materialize."""
    ckpt.published_id(folder, asset=BASELINES_TABLE, required=FILES)
    content = ckpt.read_json(folder / TUNING_FILE)
    if content["fit_key"] != fit_key(tasks, cfg):
        raise ValueError(
            f"{folder}: the baselines were tuned on other samples, trips, vocabulary or tuning "
            f"settings than this evaluation's: materialize {BASELINES_TABLE} again"
        )
    models = {}
    for kind, name in WEIGHTS.items():
        seq_cfg = SequentialConfig(
            **{
                k: v
                for k, v in content["info"]["SASRec" if kind == "sasrec" else "BERT4Rec"].items()
                if k in SequentialConfig.__dataclass_fields__
            }
        )
        model = SequentialRecommender(seq_cfg, content["vocab_size"])
        model.load_state_dict(ckpt.load_tensors(folder / name))
        models[kind] = model.train(False)
    return TunedBaselines(
        tifu=nb.TifuConfig(**content["tifu"]),
        upcf=nb.UpcfConfig(**content["upcf"]),
        copurchase_weight=content["copurchase_weight"],
        sasrec=models["sasrec"],
        bert4rec=models["bert4rec"],
        info=content["info"],
    )
