"""The moving average of the weights (D70): decay (1 + t) / (10 + t) after t steps, capped at
``decay``; swapped in only inside ``applied``; restarted by ``reset``; resumable."""

import torch
import torch.nn as nn

from retailsim_core.training.run.loop_state import WeightAverage


def _set(model: nn.Module, value: float) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)


def _value(model: nn.Module) -> float:
    return float(next(model.parameters()).flatten()[0])


def test_a_recency_weighted_average_whose_horizon_grows_to_the_cap():
    model = nn.Linear(2, 1)
    _set(model, 0.0)
    average = WeightAverage(model, decay=0.25)
    expected = 0.0
    for step, value in enumerate([4.0, 8.0, 12.0], start=1):
        _set(model, value)
        average.update()
        decay = min(0.25, (1 + step) / (10 + step))  # 2/11, 3/12, then the cap 0.25
        expected = decay * expected + (1 - decay) * value
        assert abs(average.tensors()["weight"][0, 0].item() - expected) < 1e-6
    with average.applied():
        assert abs(_value(model) - expected) < 1e-6  # the averaged weights inside the block ...
    assert _value(model) == 12.0  # ... the model's own after it
    average.reset()
    assert average.steps == 0 and average.tensors()["weight"][0, 0].item() == 12.0
    # early in a phase the average follows the weights (a head that starts training with the
    # phase is not held at its initial weights): 100 steps at 1.0 after 0.0, with a cap of 0.999
    _set(model, 0.0)
    slow = WeightAverage(model, decay=0.999)
    _set(model, 1.0)
    for _ in range(100):
        slow.update()
    assert slow.tensors()["weight"][0, 0].item() > 0.99  # a fixed 0.999 would give 0.095


def test_an_average_restored_from_its_tensors_continues_identically():
    model = nn.Linear(3, 2)
    a, b = WeightAverage(model, 0.9), WeightAverage(model, 0.9)
    for _ in range(5):
        with torch.no_grad():
            model.weight.add_(1.0)
        a.update()
    b.load({k: v.clone() for k, v in a.tensors().items()}, a.steps)
    with torch.no_grad():
        model.weight.mul_(2.0)
    a.update()
    b.update()
    for name, value in a.tensors().items():
        assert torch.equal(value, b.tensors()[name])
