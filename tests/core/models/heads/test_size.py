"""The size head's tilt (D131): applied at inference only, the least-divergence move of the
head's mean; ``fit_tilt`` finds the tilt of any reachable mean."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from retailsim_core.models.heads.size import TILT_BOUND, SizeHead, fit_tilt, tilted_mean


def test_the_tilt_moves_inference_logits_only():
    head = SizeHead(4, 6)
    x = torch.randn(3, 4)
    raw = head(x).detach()
    head.tilt.fill_(0.5)
    head.train(True)
    assert torch.equal(head(x), torch.nn.functional.linear(x, head.weight, head.bias))
    head.train(False)
    torch.testing.assert_close(head(x), raw + 0.5 * torch.arange(1.0, 7.0))
    assert set(head.state_dict()) == {"weight", "bias"}  # checkpoints keep their keys


def test_a_tilt_of_zero_is_the_heads_own_mean():
    probs = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    assert tilted_mean(probs, 0.0) == pytest.approx((1.5 + 3.0) / 2)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), share=st.floats(0.05, 0.95))
def test_fit_tilt_reaches_every_mean_between_the_ends(seed, share):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(12), size=20)
    low, high = tilted_mean(probs, -TILT_BOUND), tilted_mean(probs, TILT_BOUND)
    target = low + share * (high - low)
    tilt = fit_tilt(probs, target)
    assert tilted_mean(probs, tilt) == pytest.approx(target, abs=1e-4)
    assert (tilt > 0) == (target > tilted_mean(probs, 0.0))


def test_an_unreachable_mean_is_clipped_to_the_bound():
    probs = np.full((3, 5), 0.2)
    assert fit_tilt(probs, 0.5) == -TILT_BOUND and fit_tilt(probs, 9.0) == TILT_BOUND
