"""``tuned_baselines``: the baselines tuned on validation weeks, written once and read by every
evaluation of a checkpoint (D68).

The tuning stage (``evaluation/tuning.py``) does not depend on the world model: its grids, the
SASRec/BERT4Rec training and the co-purchase weight read the samples, the trips and the
vocabulary only. Fitting it in its own asset means a new checkpoint is evaluated in minutes,
without training the sequence models again. The folder holds

    tuning.json          the chosen configurations, their validation figures and the fit key
    sasrec.safetensors   SASRec weights (its config is in tuning.json)
    bert4rec.safetensors BERT4Rec weights
    manifest.json        checksums of the three files, written last

The fit key digests everything the choice depends on (the vocabulary, the validation baskets,
every trip, the evaluation's tuning settings); ``load_baselines`` refuses a folder whose key
differs from the warehouse's, naming the asset to materialize again.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np

from retailsim_core.evaluation import neighbour_baselines as nb
from retailsim_core.evaluation.eval_config import EvalConfig
from retailsim_core.evaluation.sequential import SequentialConfig, SequentialRecommender
from retailsim_core.evaluation.tasks import EvalTasks, load_tasks
from retailsim_core.evaluation.tuning import TunedBaselines, tune_baselines
from retailsim_core.split import TemporalSplit
from retailsim_core.training import checkpoint as ckpt
from retailsim_core.warehouse import Warehouse

BASELINES_TABLE = "tuned_baselines"
TUNING_FILE = "tuning.json"
_WEIGHTS = {"sasrec": "sasrec.safetensors", "bert4rec": "bert4rec.safetensors"}
FILES = (TUNING_FILE, *_WEIGHTS.values())


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


def fit_baselines(
    warehouse: Warehouse,
    split: TemporalSplit,
    cfg: EvalConfig = EvalConfig(),
    log: Callable[[str], None] = lambda _: None,
    folder: Path | None = None,
) -> dict:
    """Tune every baseline on validation weeks and write the folder (default: the warehouse's
    ``tuned_baselines``); returns tuning.json's content."""
    start = time.perf_counter()
    tasks = load_tasks(warehouse, split, cfg, with_model=False)
    tuned = tune_baselines(tasks, cfg, log)
    folder = folder or warehouse.table_dir(BASELINES_TABLE)
    folder.mkdir(parents=True, exist_ok=True)
    for kind, name in _WEIGHTS.items():
        ckpt.save_tensors(folder / name, getattr(tuned, kind).state_dict())
    content = {
        "fit_key": fit_key(tasks, cfg),
        "split": asdict(split),
        "vocab_size": tasks.data.vocab.size,
        "validation_samples": len(tasks.valid_rows),
        "tifu": asdict(tuned.tifu),
        "upcf": asdict(tuned.upcf),
        "copurchase_weight": tuned.copurchase_weight,
        "info": tuned.info,
        "seconds": round(time.perf_counter() - start, 1),
    }
    ckpt.write_json(folder / TUNING_FILE, content)
    ckpt.write_manifest(folder, FILES)
    return content


def load_baselines(folder: Path, tasks: EvalTasks, cfg: EvalConfig) -> TunedBaselines:
    """The tuned baselines of ``folder``, checked against the warehouse ``tasks`` were read from:
    a missing, corrupt or stale folder is an error naming the asset to materialize."""
    ckpt.published_id(folder, asset=BASELINES_TABLE)
    content = ckpt.read_json(folder / TUNING_FILE)
    if content["fit_key"] != fit_key(tasks, cfg):
        raise ValueError(
            f"{folder}: the baselines were tuned on other samples, trips, vocabulary or tuning "
            f"settings than this evaluation's: materialize {BASELINES_TABLE} again"
        )
    models = {}
    for kind, name in _WEIGHTS.items():
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
