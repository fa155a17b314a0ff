"""The inference cache of weight-only projections is reused only while the weights are the
same, and never where gradients are recorded."""

import torch

from retailsim_core.models.weight_cache import WeightCache


def test_reused_until_a_weight_changes_in_place():
    w = torch.nn.Parameter(torch.ones(3, 2))
    cache, calls = WeightCache(), []

    def compute():
        calls.append(1)
        return w.detach() * 2

    with torch.no_grad():
        first = cache.get("x", (w,), compute)
        assert cache.get("x", (w,), compute) is first and len(calls) == 1
        w.add_(1.0)  # an optimizer step: the version counter moves
        again = cache.get("x", (w,), compute)
    assert len(calls) == 2 and torch.equal(again, torch.full((3, 2), 4.0))


def test_bypassed_when_gradients_are_recorded():
    w = torch.nn.Parameter(torch.ones(2))
    cache = WeightCache()
    with torch.no_grad():
        cache.get("x", (w,), lambda: w * 3)
    out = cache.get("x", (w,), lambda: w * 5)  # grad mode: computed, differentiable
    assert out.requires_grad and torch.equal(out.detach(), torch.full((2,), 5.0))


def test_a_loaded_state_dict_invalidates_the_cache():
    layer = torch.nn.Linear(2, 2)
    cache = WeightCache()
    with torch.no_grad():
        before = cache.get("y", (layer.weight,), lambda: layer.weight.clone())
    layer.load_state_dict({"weight": torch.zeros(2, 2), "bias": torch.zeros(2)})
    with torch.no_grad():
        after = cache.get("y", (layer.weight,), lambda: layer.weight.clone())
    assert not torch.equal(before, after) and torch.equal(after, torch.zeros(2, 2))
