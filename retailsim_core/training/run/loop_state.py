"""The training loop's state between epochs, saved after every epoch so that a run resumed
after epoch e is bit-identical to one that never stopped (design §5.6; tested), and the moving
average of the weights it carries (D70)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn as nn

from retailsim_core.training.checkpoints import checkpoint as ckpt
from retailsim_core.training.run.train_config import Phase, TrainConfig


@dataclass
class LoopState:
    epoch: int = 0  # epochs completed over all phases
    phase: int = 0
    phase_epoch: int = 0  # epochs completed in the current phase
    best_metric: float = -1.0
    best_epoch: int = 0
    bad_epochs: int = 0
    done: bool = False
    seconds: float = 0.0
    history: list[dict] = field(default_factory=list)
    average_steps: int = 0  # optimizer steps folded into the weight average since its reset


def save_loop_state(
    folder: Path,
    state: LoopState,
    model,
    contrastive,
    optimizer,
    best,
    fingerprint: str,
    average: WeightAverage | None,
) -> None:
    """Everything a resumed run needs after an epoch: weights, best weights, weight average,
    optimizer, loop counters, in safetensors + JSON."""
    optim, groups = ckpt.optimizer_tensors(optimizer)
    averaged = average.tensors() if average is not None else {}
    tensors = {
        **{f"model.{k}": v for k, v in model.state_dict().items()},
        **{f"contrastive.{k}": v for k, v in contrastive.state_dict().items()},
        **{f"best.{k}": v for k, v in best.items()},
        **{f"average.{k}": v for k, v in averaged.items()},
        **optim,
    }
    ckpt.save_tensors(folder / "state.safetensors", tensors)
    ckpt.write_json(
        folder / "state.json",
        {"loop": asdict(state), "param_groups": groups, "fingerprint": fingerprint},
    )


def resume_loop_state(
    folder: Path, model, contrastive, optimizer, average: WeightAverage | None
) -> tuple[LoopState, dict]:
    """Restores what ``save_loop_state`` wrote into the given modules; returns the loop state
    and the best weights."""
    tensors = ckpt.load_tensors(folder / "state.safetensors")
    meta = ckpt.read_json(folder / "state.json")

    def pick(prefix):
        return {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}

    model.load_state_dict(pick("model."))
    contrastive.load_state_dict(pick("contrastive."))
    ckpt.restore_optimizer(
        optimizer,
        {k: v for k, v in tensors.items() if k.startswith("optim.")},
        meta["param_groups"],
    )
    state = LoopState(**meta["loop"])
    if average is not None:
        average.load(pick("average."), state.average_steps)
    return state, pick("best.")


def end_epoch(
    state: LoopState, cfg: TrainConfig, metrics: dict, model: nn.Module, best: dict, phase: Phase
) -> None:
    """Records a finished epoch of ``phase`` and moves the schedule on (design §5.6.1): a better
    early-stopping metric keeps the model's weights in ``best``; a phase ends after its epochs or
    ``cfg.patience`` epochs without improvement (warm-up epochs never count against patience);
    past ``cfg.max_seconds`` the run goes straight to fine-tuning, and ends after a fine-tuning
    epoch."""
    state.epoch += 1
    state.phase_epoch += 1
    metric = metrics[cfg.early_stopping_metric]
    state.history.append({"epoch": state.epoch, "phase": phase.name, **metrics})
    if metric > state.best_metric:
        state.best_metric, state.best_epoch, state.bad_epochs = metric, state.epoch, 0
        best.update({k: v.detach().clone() for k, v in model.state_dict().items()})
    elif state.phase > 0:  # warm-up epochs never count against patience
        state.bad_epochs += 1
    over_time = cfg.max_seconds is not None and state.seconds >= cfg.max_seconds
    if state.phase_epoch >= phase.epochs or state.bad_epochs >= cfg.patience:
        state.phase, state.phase_epoch, state.bad_epochs = state.phase + 1, 0, 0
    if over_time and state.phase < len(cfg.phases) - 1:
        state.phase, state.phase_epoch = len(cfg.phases) - 1, 0  # go straight to fine-tuning
        state.history[-1]["note"] = "time budget reached: fine-tuning"
    elif over_time and state.phase_epoch > 0:
        state.phase = len(cfg.phases)
    state.done = state.phase >= len(cfg.phases)


class WeightAverage:
    """An exponential moving average of the model's parameters, the weights validation judges
    and the checkpoint keeps (decision D70).

    With a few hundred optimizer steps per run and validation on a few thousand baskets, the raw
    weights of consecutive epochs differ by SGD noise as large as the gains early stopping chases;
    the average over the last steps is a smoother, better point. After t steps since the last
    reset (every phase start) the decay is ``min(decay, (1 + t) / (10 + t))``: the horizon grows
    with the phase (about 12 steps after 100, 30 after 300, up to ``1 / (1 - decay)``), so heads
    whose losses start with a phase (basket size, auxiliary) are not averaged with their untrained
    weights, and short runs (tests) are not dominated by the initial weights.
    """

    def __init__(self, model: nn.Module, decay: float):
        self.model, self.decay, self.steps = model, decay, 0
        self.average = {n: p.detach().clone() for n, p in model.named_parameters()}

    def reset(self) -> None:
        """Start again from the model's current weights (a new phase starts from the best)."""
        self.steps = 0
        for n, p in self.model.named_parameters():
            self.average[n].copy_(p.detach())

    @torch.no_grad()
    def update(self) -> None:
        """Fold the weights after an optimizer step into the average."""
        self.steps += 1
        decay = min(self.decay, (1 + self.steps) / (10 + self.steps))
        for n, p in self.model.named_parameters():
            self.average[n].lerp_(p.detach(), 1.0 - decay)

    @contextmanager
    def applied(self) -> Iterator[None]:
        """The model holds the averaged weights inside the block, its own weights after it."""
        own = {n: p.detach().clone() for n, p in self.model.named_parameters()}
        self._copy_into_model(self.average)
        try:
            yield
        finally:
            self._copy_into_model(own)

    @torch.no_grad()
    def _copy_into_model(self, tensors: dict[str, torch.Tensor]) -> None:
        for n, p in self.model.named_parameters():
            p.copy_(tensors[n])

    def tensors(self) -> dict[str, torch.Tensor]:
        return dict(self.average)

    @torch.no_grad()
    def load(self, tensors: dict[str, torch.Tensor], steps: int) -> None:
        self.steps = steps
        for n, value in tensors.items():
            self.average[n].copy_(value)
