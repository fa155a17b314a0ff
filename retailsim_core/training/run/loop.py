"""Three-phase, leak-free, resumable training of the world model (design §5.6).

Phases (design §5.6.1): warm-up (focal loss only, low LR) -> main (all losses, early stopping with
patience on validation next-basket NDCG@10) -> fine-tune (harder masking, smaller batches,
tighter clipping), starting from the best weights. Training samples are weeks <= train_end;
validation samples are the validation weeks, whose histories grow week by week (the trip store
slice before each sample's week: incremental history, never a future trip).

Determinism and resuming: everything random in epoch e draws from seeds derived from
(seed, e) — batch order, masking, T6 dropout, negatives, dropout — and the whole loop state is
saved after every epoch (``loop_state.py``), so a run resumed after epoch e is bit-identical to
one that never stopped (tested).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

from retailsim_core.datasets.tensors import LengthBucketSampler, TrainingSet
from retailsim_core.models.determinism import deterministic_kernels
from retailsim_core.models.losses import LossWeights, world_model_loss
from retailsim_core.models.world_model import WorldModel
from retailsim_core.training.checkpoints import checkpoint as ckpt
from retailsim_core.training.run import distributed
from retailsim_core.training.run.corruption import basket_queries, corrupt, shuffle_items
from retailsim_core.training.run.loop_state import (
    LoopState,
    WeightAverage,
    end_epoch,
    resume_loop_state,
    save_loop_state,
)
from retailsim_core.training.run.param_groups import adamw, param_groups, step_with_column_lr
from retailsim_core.training.run.train_config import Phase, TrainConfig
from retailsim_core.training.scoring.validation import (
    masked_item_metrics_of_weights,
    next_basket_metrics_of,
)


@dataclass
class TrainResult:
    state: LoopState
    best_weights: dict[str, torch.Tensor]


def _batch_seed(seed: int, epoch: int) -> int:
    return int(np.random.default_rng([seed, epoch, 7]).integers(2**62))


class TrainStep(nn.Module):
    """The model and the contrastive projection behind one forward that returns the loss, so that
    DistributedDataParallel sees every parameter's use (torchrun, ``distributed.py``)."""

    def __init__(self, model: WorldModel, contrastive: nn.Module):
        super().__init__()
        self.model, self.contrastive = model, contrastive

    def forward(
        self,
        batch,
        inputs,
        targets,
        given_mission,
        weights: LossWeights,
        generator: torch.Generator,
        basket_targets=None,
        gamma: float = 2.0,
    ):
        hidden = (targets != 0) | (
            inputs == self.model.mask_token
        )  # every [MASK] slot hides its price
        out = self.model(batch, inputs, hidden=hidden, given_mission=given_mission)
        loss = world_model_loss(
            self.model,
            out,
            batch,
            inputs,
            targets,
            given_mission,
            weights,
            generator,
            self.contrastive,
            gamma=gamma,
            basket_targets=basket_targets,
        )
        return loss.total, loss.parts


def train_epoch(
    step: nn.Module,
    optimizer: torch.optim.Optimizer,
    data: TrainingSet,
    rows: np.ndarray,
    buckets: np.ndarray,
    phase: Phase,
    cfg: TrainConfig,
    epoch: int,
    log: Callable[[str], None],
    average: WeightAverage | None = None,
    deadline: float | None = None,
) -> dict:
    """One epoch; under torchrun each rank takes every world-th batch of the same shuffled list.
    ``average`` folds in the weights after every step; past ``deadline`` (``perf_counter``
    seconds) no further batch starts (a refresh's budget)."""
    rank, world = distributed.rank_and_world()
    torch.manual_seed(_batch_seed(cfg.seed, epoch))  # dropout
    rng = np.random.default_rng([cfg.seed, epoch])
    gen = torch.Generator().manual_seed(_batch_seed(cfg.seed, epoch + 1_000_000))
    if cfg.samples_per_epoch is not None and len(rows) > cfg.samples_per_epoch:
        keep = np.sort(rng.choice(len(rows), cfg.samples_per_epoch, replace=False))
        rows, buckets = rows[keep], buckets[keep]
    sampler = LengthBucketSampler(buckets, phase.batch_size, seed=cfg.seed)
    sampler.set_epoch(epoch)
    batches = list(sampler)
    batches = batches[
        rank : len(batches) - len(batches) % world : world
    ]  # same step count on every rank
    for group in optimizer.param_groups:
        group["lr"] = phase.lr * group.get("lr_scale", 1.0)
    step.train()
    sums: dict[str, float] = {}
    n = 0
    for i, batch_rows in enumerate(batches):
        if deadline is not None and time.perf_counter() > deadline:
            log(f"  budget reached after {i} of {len(batches)} batches")
            break
        batch = data[rows[batch_rows]]
        tokens, prices = shuffle_items(
            batch["tokens"].numpy(), batch["item_prices"].numpy(), data.vocab, rng
        )
        batch = {
            **batch,
            "tokens": torch.from_numpy(tokens),
            "item_prices": torch.from_numpy(prices),
        }
        inputs, targets = corrupt(tokens, data.vocab, phase.mask_rate, cfg.suffix_share, rng)
        inputs, targets, (q_rows, q_tokens) = basket_queries(
            tokens, inputs, targets, data.vocab, cfg.query_share, rng
        )
        inputs, targets = torch.from_numpy(inputs), torch.from_numpy(targets)
        given = torch.from_numpy(rng.random(len(batch_rows)) < cfg.mission_given_share)
        total, parts = step(
            batch,
            inputs,
            targets,
            given,
            phase.weights,
            gen,
            (torch.from_numpy(q_rows), torch.from_numpy(q_tokens)),
            cfg.focal_gamma,
        )
        optimizer.zero_grad(set_to_none=True)
        total.backward()
        nn.utils.clip_grad_norm_(step.parameters(), phase.clip)
        step_with_column_lr(optimizer)
        if average is not None:
            average.update()
        for k, v in parts.items():
            sums[k] = sums.get(k, 0.0) + v
        n += 1
        if i % 100 == 0:
            log(
                f"  epoch {epoch + 1} ({phase.name}) batch {i}/{len(batches)} loss "
                f"{parts['total']:.4f}"
            )
    return {f"train_{k}": v / max(n, 1) for k, v in sums.items()}


def train(
    model: WorldModel,
    train_data: TrainingSet,
    train_buckets: np.ndarray,
    valid_data: TrainingSet,
    popularity: np.ndarray,
    cfg: TrainConfig,
    state_dir: Path | None = None,
    log: Callable[[str], None] = lambda _: None,
    stop_after_epochs: int | None = None,
    fingerprint: str = "",
) -> TrainResult:
    """Run (or resume from ``state_dir``) the phased schedule; returns the best weights.
    A saved state resumes only when its ``fingerprint`` (data + configs) matches; otherwise the
    run starts afresh. ``stop_after_epochs`` interrupts the run (tests of resuming)."""
    contrastive = nn.Linear(model.cfg.d_model, model.cfg.d_model)
    torch.manual_seed(cfg.seed)
    contrastive.reset_parameters()
    step = distributed.wrap(TrainStep(model, contrastive))
    optimizer = adamw(
        param_groups(step, model, cfg), lr=cfg.phases[0].lr, weight_decay=cfg.weight_decay
    )
    is_writer = distributed.rank_and_world()[0] == 0
    state, best = LoopState(), {k: v.detach().clone() for k, v in model.state_dict().items()}
    average = WeightAverage(model, cfg.ema_decay) if cfg.ema_decay is not None else None
    if (
        state_dir is not None
        and (state_dir / "state.json").exists()
        and ckpt.read_json(state_dir / "state.json").get("fingerprint") == fingerprint
    ):
        state, best = resume_loop_state(state_dir, model, contrastive, optimizer, average)
        log(
            f"resumed after epoch {state.epoch} (phase "
            f"{cfg.phases[min(state.phase, len(cfg.phases) - 1)].name})"
        )
    rows = np.arange(len(train_data))
    valid_rows = np.arange(len(valid_data))
    if cfg.valid_samples is not None and len(valid_rows) > cfg.valid_samples:
        valid_rows = np.sort(
            np.random.default_rng([cfg.seed, 99]).choice(
                len(valid_rows), cfg.valid_samples, replace=False
            )
        )
    run = _Run(
        step=step,
        optimizer=optimizer,
        model=model,
        contrastive=contrastive,
        average=average,
        train_data=train_data,
        rows=rows,
        train_buckets=train_buckets,
        valid_data=valid_data,
        valid_rows=valid_rows,
        popularity=popularity,
        cfg=cfg,
        state_dir=state_dir,
        is_writer=is_writer,
        fingerprint=fingerprint,
        log=log,
    )
    with deterministic_kernels():  # same seed, same bytes (D47)
        _run_epochs(run, state, best, stop_after_epochs)
    return TrainResult(state=state, best_weights=best)


@dataclass(frozen=True)
class _Run:
    """What stays fixed over a run's epochs: the modules and optimizer it steps, its data, its
    settings and where its state goes."""

    step: nn.Module  # TrainStep (DDP-wrapped under torchrun)
    optimizer: torch.optim.Optimizer
    model: WorldModel
    contrastive: nn.Module
    average: WeightAverage | None  # the moving average of the weights (D70), or None
    train_data: TrainingSet
    rows: np.ndarray  # training sample rows
    train_buckets: np.ndarray  # history bucket of each training sample
    valid_data: TrainingSet
    valid_rows: np.ndarray  # the fixed validation subsample
    popularity: np.ndarray  # (V,) training popularity, the masked-item reference
    cfg: TrainConfig
    state_dir: Path | None  # where the resumable state is saved after each epoch
    is_writer: bool  # rank 0 writes the state
    fingerprint: str  # data + configs: a saved state resumes only when it matches
    log: Callable[[str], None]


def _run_epochs(
    run: _Run, state: LoopState, best: dict, stop_after_epochs: int | None = None
) -> None:
    """Epochs until the schedule ends (or ``stop_after_epochs``), updating ``state`` and the
    ``best`` weights in place."""
    r, cfg, model, average = run, run.cfg, run.model, run.average
    run_epochs = 0
    while not state.done:
        phase = cfg.phases[state.phase]
        start = time.perf_counter()
        metrics = train_epoch(
            r.step, r.optimizer, r.train_data, r.rows, r.train_buckets, phase, cfg, state.epoch,
            r.log, average,
        )  # fmt: skip
        with average.applied() if average is not None else contextlib.nullcontext():
            metrics.update(next_basket_metrics_of(model, r.valid_data, r.valid_rows))
            state.seconds += time.perf_counter() - start
            end_epoch(state, cfg, metrics, model, best, phase)  # the best are averaged weights
        r.log(
            f"epoch {state.epoch} ({phase.name}): "
            + ", ".join(f"{k} {v:.4f}" for k, v in metrics.items())
        )
        new_phase = state.phase < len(cfg.phases) and state.phase_epoch == 0
        if new_phase and state.epoch > 1:
            model.load_state_dict(best)  # a new phase starts from the best
        if new_phase and average is not None:
            average.reset()  # the new phase's losses (size, auxiliary heads) start moving now
        if average is not None:
            state.average_steps = average.steps
        if r.state_dir is not None and r.is_writer:
            save_loop_state(
                r.state_dir, state, model, r.contrastive, r.optimizer, best, r.fingerprint, average
            )
        distributed.barrier()
        run_epochs += 1
        if stop_after_epochs is not None and run_epochs >= stop_after_epochs and not state.done:
            break
    if state.done:  # the chosen weights' masked-item figures, in their epoch's history row
        best_row = next(h for h in state.history if h["epoch"] == state.best_epoch)
        kept = masked_item_metrics_of_weights(
            model, best, r.valid_data, r.valid_rows, r.popularity, cfg.valid_mask_rate, cfg.seed
        )
        best_row.update(kept)
