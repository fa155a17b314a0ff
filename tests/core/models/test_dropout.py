"""The uniform-draw dropout against torch's: same contract, same statistics, same gradients."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from retailsim_core.models.dropout import Dropout, swap_dropout


@settings(max_examples=25, deadline=None)
@given(p=st.floats(0.05, 0.9), seed=st.integers(0, 2**31 - 1))
def test_zeroes_a_share_p_and_scales_the_rest(p: float, seed: int):
    torch.manual_seed(seed)
    x = torch.rand(200, 500) + 0.5  # never 0: a zero in the output is a dropped element
    y = Dropout(p).train()(x)
    dropped = (y == 0).float().mean().item()
    reference = (F.dropout(x, p, training=True) == 0).float().mean().item()
    # 100,000 draws: the share's standard error is below 0.0016
    assert dropped == pytest.approx(p, abs=0.01)
    assert dropped == pytest.approx(reference, abs=0.015)
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))


def test_identity_in_eval_mode_and_at_zero():
    x = torch.randn(4, 7)
    assert Dropout(0.3).eval()(x) is x
    assert Dropout(0.0).train()(x) is x
    assert torch.equal(Dropout(1.0).train()(x), torch.zeros_like(x))


def test_gradient_is_the_mask_and_scale():
    torch.manual_seed(0)
    x = torch.randn(50, 60, requires_grad=True)
    y = Dropout(0.25).train()(x)
    y.sum().backward()
    expected = torch.where(y != 0, torch.full_like(x, 1 / 0.75), torch.zeros_like(x))
    torch.testing.assert_close(x.grad, expected)


def test_same_seed_same_mask():
    x = torch.randn(30, 40)
    torch.manual_seed(5)
    a = Dropout(0.2).train()(x)
    torch.manual_seed(5)
    assert torch.equal(a, Dropout(0.2).train()(x))


def test_rejects_a_probability_outside_zero_one():
    with pytest.raises(ValueError, match="dropout probability"):
        Dropout(1.5)


def test_swap_dropout_replaces_every_dropout_and_keeps_the_weights():
    torch.manual_seed(0)
    layer = nn.TransformerDecoderLayer(16, 2, 32, 0.1, batch_first=True, norm_first=True)
    before = {k: v.clone() for k, v in layer.state_dict().items()}
    swap_dropout(layer)
    kinds = [type(m) for m in layer.modules()]
    assert nn.Dropout not in kinds and kinds.count(Dropout) == 4
    assert all(torch.equal(before[k], v) for k, v in layer.state_dict().items())
    layer.eval()
    x, memory = torch.randn(3, 5, 16), torch.randn(3, 4, 16)
    reference = nn.TransformerDecoderLayer(16, 2, 32, 0.1, batch_first=True, norm_first=True)
    reference.load_state_dict(before)
    torch.testing.assert_close(layer(x, memory), reference.eval()(x, memory))


def test_the_world_model_and_sequence_baselines_train_with_it():
    from retailsim_core.baselines.sequential import SequentialConfig, SequentialRecommender
    from retailsim_core.models.world_model import BasketDecoder, WorldModelConfig

    for module in (
        BasketDecoder(WorldModelConfig.preset("tiny")),
        SequentialRecommender(SequentialConfig(), vocab_size=20),
    ):
        kinds = {type(m) for m in module.modules()}
        assert Dropout in kinds and nn.Dropout not in kinds
