"""The epoch schedule (design §5.6.1): early stopping, patience, phases and the time budget."""

import torch
import torch.nn as nn

from retailsim_core.models.losses import LossWeights
from retailsim_core.training.run.loop_state import LoopState, end_epoch
from retailsim_core.training.run.train_config import Phase, TrainConfig

METRIC = "valid_next_NDCG@10"


def phase(name: str, epochs: int) -> Phase:
    return Phase(
        name=name, epochs=epochs, lr=1e-3, batch_size=8, mask_rate=0.2, clip=1.0,
        weights=LossWeights(),
    )  # fmt: skip


def config(patience=2, max_seconds=None, warm_up=2, fine_tune=1) -> TrainConfig:
    return TrainConfig(
        phases=(phase("warm-up", warm_up), phase("main", 5), phase("fine-tune", fine_tune)),
        patience=patience,
        max_seconds=max_seconds,
    )


def run(cfg: TrainConfig, scores: list[float], seconds_per_epoch: float = 1.0):
    """Feeds one validation score per epoch; the model's weight records the epoch it came from.
    Returns the state and the kept weights' epoch."""
    model, state, best = nn.Linear(1, 1, bias=False), LoopState(), {}
    for score in scores:
        if state.done:
            break
        with torch.no_grad():
            model.weight.fill_(state.epoch + 1)
        state.seconds += seconds_per_epoch
        end_epoch(state, cfg, {METRIC: score}, model, best, cfg.phases[state.phase])
    return state, int(best["weight"].item())


def test_the_best_epoch_keeps_its_weights_and_patience_ends_the_main_phase():
    # warm-up 0.1 0.05 (no patience), main 0.3 0.2 0.25 (2 bad: patience), fine-tune 0.35
    state, kept = run(config(), [0.1, 0.05, 0.3, 0.2, 0.25, 0.35, 0.9])
    assert [h["phase"] for h in state.history] == ["warm-up"] * 2 + ["main"] * 3 + ["fine-tune"]
    assert state.done and state.epoch == 6
    assert (state.best_epoch, state.best_metric, kept) == (6, 0.35, 6)


def test_warm_up_epochs_never_count_against_patience():
    state, _ = run(config(patience=1, warm_up=3), [0.5, 0.4, 0.3, 0.2])
    assert [h["phase"] for h in state.history] == ["warm-up"] * 3 + ["main"]
    assert state.phase == 2 and not state.done  # the main phase's first bad epoch ends it


def test_a_worse_fine_tune_keeps_the_earlier_best():
    state, kept = run(config(), [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.65])
    assert state.done and state.history[-1]["phase"] == "fine-tune"
    assert (state.best_epoch, kept) == (7, 7)  # the main phase ran its 5 epochs


def test_the_time_budget_goes_straight_to_fine_tuning_then_ends():
    state, _ = run(config(max_seconds=3.0, fine_tune=3), [0.1, 0.2, 0.3, 0.4, 0.5])
    assert [h["phase"] for h in state.history] == ["warm-up", "warm-up", "main", "fine-tune"]
    assert state.history[2]["note"] == "time budget reached: fine-tuning"
    assert state.done and state.epoch == 4
