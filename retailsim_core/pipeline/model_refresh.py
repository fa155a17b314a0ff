"""``model_refresh``: the world model refreshed as weeks arrive (issue #60, D111).

Partition W is the model to predict week W + 1 with: the previous partition's model (W - 1; the
trained checkpoint before the first) fine-tuned on the samples of the weeks it has not learned,
through W (``training/adapt/refresh.py``). The chain starts at the last validation week, whose
refresh catches up on every week after the training weeks; the partitions before it hold no
model of their own (``refresh.json`` says the trained checkpoint is the freshest). Each
partition folder is a checkpoint (safetensors + JSON + vocabulary + manifest) and
``refresh.json``, written to a temporary folder and renamed into place.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import polars as pl

from retailsim_core.datasets.tensors import TensorConfig
from retailsim_core.pipeline.readers.warehouse_inputs import load_model_inputs
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.io import atomic_write_parquet
from retailsim_core.storage.mapped import MappedArrays
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import CHECKPOINT_TABLE, REFRESH_TABLE, SAMPLES_TABLE
from retailsim_core.training.adapt.refresh import RefreshConfig, fine_tune, refresh_samples
from retailsim_core.training.checkpoints import checkpoint as ckpt
from retailsim_core.training.run.train_config import TrainConfig

MARKER = "refresh.json"
log = logging.getLogger(__name__)


def model_folder(warehouse: Warehouse, week: int) -> Path | None:
    """The checkpoint folder to predict week ``week`` + 1 with, as of the ``model_refresh``
    partition ``week``: its own model, the trained checkpoint where the partition says so, or
    None when the partition is missing or unpublished (never a silent fallback). A published
    partition whose model its manifest does not vouch for is returned as it is: its reader
    refuses it, naming it (D113), rather than treating a damaged week as a missing one."""
    folder = warehouse.partition_dir(REFRESH_TABLE, week)
    if not (folder / MARKER).exists():
        return None
    if ckpt.read_json(folder / MARKER)["model"] == CHECKPOINT_TABLE:
        return warehouse.table_dir(CHECKPOINT_TABLE)
    return folder


def through_week(folder: Path) -> int:
    """The last week a checkpoint folder's model has learned from."""
    config = ckpt.read_json(folder / "config.json")
    return config.get("refresh", {}).get("through_week", config["split"]["train_end"])


def refresh_weeks(
    warehouse: Warehouse,
    split: TemporalSplit,
    weeks: Iterable[int],
    train_cfg: TrainConfig,
    cfg: RefreshConfig | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> list[dict]:
    """Materialize the partitions ``weeks`` in order, each from the one before it; one summary
    per week. The inputs are read once for every week the run trains."""
    cfg, weeks = cfg or RefreshConfig(), sorted(weeks)
    trained = [w for w in weeks if w >= split.valid_end]
    inputs = None
    if trained:
        # The run's first new week: after the training weeks where the chain starts, else the
        # first partition's own week (the one before it has read the rest).
        first = split.train_end + 1 if trained[0] == split.valid_end else trained[0]
        first -= cfg.replay_weeks
        needed = [w for w in warehouse.weeks(SAMPLES_TABLE) if first <= w <= trained[-1]]
        inputs = load_model_inputs(warehouse, needed, MappedArrays(), log)
    out = []
    for week in weeks:
        if week < split.valid_end:
            out.append(_frozen(warehouse, week))
        else:
            out.append(_refresh(warehouse, split, week, inputs, train_cfg, cfg, log))
    return out


def _frozen(warehouse: Warehouse, week: int) -> dict:
    """A partition before the chain: the trained checkpoint is the freshest model."""
    summary = {"week": week, "model": CHECKPOINT_TABLE, "note": "before the refresh chain"}
    _publish(warehouse.partition_dir(REFRESH_TABLE, week), summary, lambda tmp: None)
    return summary


def _refresh(warehouse, split, week, inputs, train_cfg, cfg, log) -> dict:
    previous = warehouse.table_dir(CHECKPOINT_TABLE)
    if week > split.valid_end:
        previous = model_folder(warehouse, week - 1)
        if previous is None:
            raise FileNotFoundError(
                f"model_refresh week {week} warm-starts from week {week - 1}'s, which is missing: "
                "materialize the partitions in order"
            )
    model, vocab, config = ckpt.load_model(previous)
    previous_id = config.pop("checkpoint_id")  # the new folder's manifest gives its own
    new_weeks = list(range(through_week(previous) + 1, week + 1))
    rows = refresh_samples(inputs.samples, new_weeks, cfg)
    summary = {
        "week": week,
        "model": REFRESH_TABLE,
        "previous": previous.name,
        "previous_id": previous_id,
        "through_week": week,
        "new_weeks": new_weeks,
        "new_samples": int((~rows["replay"]).sum()),
        "replay_samples": int(rows["replay"].sum()),
    }
    if rows.filter(~pl.col("replay")).height:
        data = inputs.training_set(rows, TensorConfig(**config["tensors"]))
        log(f"week {week}: {summary['new_samples']:,} new + {summary['replay_samples']:,} replay")
        paid = cfg.weeks_paid(len(new_weeks))
        budget = dataclasses.replace(cfg, max_seconds=cfg.max_seconds * paid)
        figures = fine_tune(model, data, rows["bucket"].to_numpy(), train_cfg, budget, log)
        summary |= {k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()}
    else:
        summary["note"] = "no new samples: the previous model unchanged"
    config = config | {"refresh": summary | {"config": cfg.__dict__}}

    def write(tmp: Path) -> None:
        ckpt.save_tensors(tmp / "model.safetensors", model.state_dict())
        ckpt.write_json(tmp / "config.json", config)
        atomic_write_parquet(vocab.frame(), tmp / "vocabulary.parquet")
        ckpt.write_manifest(tmp)

    _publish(warehouse.partition_dir(REFRESH_TABLE, week), summary, write)
    return summary


def _publish(folder: Path, summary: dict, write: Callable[[Path], None]) -> None:
    """Write a partition into a temporary sibling, then swap it in: a reader sees the old
    partition or the new one, never a mix (the marker is the last file written)."""
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write(tmp)
    ckpt.write_json(tmp / MARKER, summary)
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def week_models(warehouse: Warehouse, weeks: Iterable[int]) -> dict[int, Path] | None:
    """The refreshed checkpoint to score each of ``weeks`` with (partition W - 1's), or None
    when any is missing: a method scored on some weeks only would not compare."""
    folders = {w: model_folder(warehouse, w - 1) for w in weeks}
    return None if any(f is None for f in folders.values()) else folders


def seconds_of(summaries: list[dict]) -> float:
    return float(np.sum([s.get("seconds", 0.0) for s in summaries]))


def newest_model(warehouse: Warehouse) -> Path:
    """The freshest published model: the newest ``model_refresh`` partition with a model of its
    own, else the trained checkpoint (what the service serves and reloads, D111)."""
    folder = warehouse.table_dir(REFRESH_TABLE)
    weeks = sorted(
        (ckpt.read_json(m)["week"] for m in folder.glob(f"week=*/{MARKER}")), reverse=True
    )
    for week in weeks:
        found = model_folder(warehouse, week)
        if found is None or found.parent != folder:
            continue
        verdict = ckpt.check_manifest(found)
        if verdict.checkpoint_id is not None:
            return found
        # A damaged week is skipped for an older, whole one: the service keeps answering.
        log.warning("%s not served: %s", found, verdict.reason)
    return warehouse.table_dir(CHECKPOINT_TABLE)
