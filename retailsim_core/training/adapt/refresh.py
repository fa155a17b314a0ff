"""A trained world model kept fresh: warm-started from the last checkpoint, fine-tuned on the
newest weeks with a replay sample of older ones (issue #60, D111).

Retail recommenders go stale within weeks (the season turns, products come and go), and every
counting baseline reads every week before the one it predicts while a frozen checkpoint stops at
its training weeks. A refresh trains the schedule's fine-tune phase on the samples of the weeks
the previous checkpoint has not seen, mixed with as many (``replay_ratio``) samples of the weeks
it has, so the newest week moves the model without erasing the rest (experience replay against
catastrophic forgetting). It has no validation split: the newest weeks are what it must learn,
so it takes a fixed pass within a wall-clock budget rather than early stopping.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl
import torch
from torch import nn

from retailsim_core.datasets.tensors import TrainingSet
from retailsim_core.models.determinism import deterministic_kernels
from retailsim_core.models.world_model import WorldModel
from retailsim_core.training.run.loop import TrainStep, train_epoch
from retailsim_core.training.run.loop_state import WeightAverage
from retailsim_core.training.run.param_groups import adamw, param_groups
from retailsim_core.training.run.train_config import TrainConfig


@dataclass(frozen=True)
class RefreshConfig:
    # Per new week, up to ``catch_up_weeks`` of them (D114):
    max_new_samples: int = 6_000  # samples of the week trained on (a seeded draw above it)
    max_seconds: float = 40.0  # wall budget of the fine-tuning (the pass stops at it)
    # A refresh reading several new weeks (the chain's first, catching up on the validation
    # weeks, or one after a gap) draws its samples from all of them but gets the samples and
    # budget of this many weeks: a weekly run's cost does not grow with the weeks behind it.
    catch_up_weeks: int = 1
    replay_ratio: float = 0.5  # replayed older samples per new sample (against forgetting)
    replay_weeks: int = 12  # the replay sample comes from this many weeks before the new ones
    lr_scale: float = 1.0  # multiple of the schedule's fine-tune phase learning rate
    seed: int = 0

    def weeks_paid(self, new_weeks: int) -> int:
        """How many weeks' samples and budget a refresh of ``new_weeks`` new weeks gets."""
        return max(1, min(new_weeks, self.catch_up_weeks))


def refresh_samples(
    samples: pl.DataFrame, new_weeks: list[int], cfg: RefreshConfig
) -> pl.DataFrame:
    """The rows a refresh trains on, in a seeded order: the samples of ``new_weeks`` (at most
    ``max_new_samples`` for each week paid, ``RefreshConfig.weeks_paid``) and ``replay_ratio``
    times as many from the ``replay_weeks`` weeks before the first new week. Never a sample of
    a later week than the newest new one."""
    first, last = min(new_weeks), max(new_weeks)
    new = samples.filter(pl.col("week").is_in(new_weeks))  # truncated ones too (D120)
    old = samples.filter(pl.col("week").is_between(first - cfg.replay_weeks, first - 1))
    rng = np.random.default_rng([cfg.seed, last])
    new = _draw(new, cfg.max_new_samples * cfg.weeks_paid(len(new_weeks)), rng)
    old = _draw(old, int(round(cfg.replay_ratio * new.height)), rng)
    return pl.concat([new.with_columns(replay=False), old.with_columns(replay=True)])


def _draw(frame: pl.DataFrame, n: int, rng: np.random.Generator) -> pl.DataFrame:
    if frame.height <= n:
        return frame
    return frame[np.sort(rng.choice(frame.height, n, replace=False))]


def fine_tune(
    model: WorldModel,
    data: TrainingSet,
    buckets: np.ndarray,
    train_cfg: TrainConfig,
    cfg: RefreshConfig,
    log: Callable[[str], None] = lambda _: None,
) -> dict:
    """Fine-tune ``model`` in place on every sample of ``data`` for one pass (or until
    ``max_seconds``: the caller scales it by the weeks the refresh adds), at the fine-tune
    phase's settings, without the contrastive term (its projection is not part of a
    checkpoint, so a fresh one would only add noise). The weights kept are the moving average
    (as the training keeps), when the schedule uses one."""
    phase = train_cfg.phases[-1]
    phase = dataclasses.replace(
        phase,
        lr=phase.lr * cfg.lr_scale,
        weights=dataclasses.replace(phase.weights, contrastive=0.0),
    )
    run_cfg = dataclasses.replace(
        train_cfg, seed=cfg.seed, samples_per_epoch=None, max_seconds=cfg.max_seconds
    )
    torch.manual_seed(cfg.seed)
    contrastive = nn.Linear(model.cfg.d_model, model.cfg.d_model)
    step = TrainStep(model, contrastive)
    optimizer = adamw(
        param_groups(step, model, run_cfg), lr=phase.lr, weight_decay=run_cfg.weight_decay
    )
    average = WeightAverage(model, run_cfg.ema_decay) if run_cfg.ema_decay is not None else None
    start = time.perf_counter()
    rows = np.arange(len(data))
    with deterministic_kernels():
        figures = train_epoch(
            step, optimizer, data, rows, buckets, phase, run_cfg, 0, log, average,
            deadline=start + cfg.max_seconds,
        )  # fmt: skip
    if average is not None:
        model.load_state_dict(average.tensors(), strict=False)
    model.train(False)
    return figures | {"samples": len(data), "seconds": round(time.perf_counter() - start, 1)}
