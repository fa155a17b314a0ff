"""``tuned_baselines``: the baselines tuned on validation weeks, written once and read by every
evaluation of a checkpoint (D68).

The tuning stage (``next_basket/tuning.py``) does not depend on the world model: its grids, the
SASRec/BERT4Rec training and the co-purchase weight read the samples, the trips and the
vocabulary only. Fitting it in its own asset means a new checkpoint is evaluated in minutes,
without training the sequence models again. The folder's files and its fit key:
``next_basket/tuned_folder.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from retailsim_core.next_basket.eval_config import EvalConfig
from retailsim_core.next_basket.tuned_folder import (
    FILES,
    TUNING_FILE,
    WEIGHTS,
    TuningRecord,
    fit_key,
)
from retailsim_core.next_basket.tuning import tune_baselines
from retailsim_core.pipeline.evaluation_run import load_tasks
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import BASELINES_TABLE
from retailsim_core.training.checkpoints import checkpoint as ckpt


def fit_baselines(
    warehouse: Warehouse,
    split: TemporalSplit,
    cfg: EvalConfig = EvalConfig(),
    log: Callable[[str], None] = lambda _: None,
    folder: Path | None = None,
) -> TuningRecord:
    """Tune every baseline on validation weeks and write the folder (default: the warehouse's
    ``tuned_baselines``); returns tuning.json's record."""
    start = time.perf_counter()
    tasks = load_tasks(warehouse, split, cfg, with_model=False)
    tuned = tune_baselines(tasks, cfg, log)
    folder = folder or warehouse.table_dir(BASELINES_TABLE)
    folder.mkdir(parents=True, exist_ok=True)
    for kind, name in WEIGHTS.items():
        ckpt.save_tensors(folder / name, getattr(tuned, kind).state_dict())
    record = TuningRecord(
        fit_key=fit_key(tasks, cfg),
        split=asdict(split),
        vocab_size=tasks.data.vocab.size,
        validation_samples=len(tasks.valid_rows),
        tifu=asdict(tuned.tifu),
        upcf=asdict(tuned.upcf),
        copurchase_weight=tuned.copurchase_weight,
        info=tuned.info,
        seconds=round(time.perf_counter() - start, 1),
    )
    ckpt.write_json(folder / TUNING_FILE, record.to_dict())
    ckpt.write_manifest(folder, FILES)
    return record
