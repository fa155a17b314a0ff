"""The price responses' optimizer groups: the depth columns of the products' (V, 4) responses
train at their own LR multiple (D91), exactly as if they were a parameter of their own."""

import torch

from retailsim_core.models.heads.products import DEPTH_RESPONSES, PRODUCT_RESPONSES, PriceResponse
from retailsim_core.training.run.param_groups import adamw, param_groups, step_with_column_lr
from retailsim_core.training.run.train_config import TrainConfig


def test_a_column_scaled_step_is_a_per_column_learning_rate():
    gen = torch.Generator().manual_seed(0)
    start = torch.randn(5, 4, generator=gen)
    grads = [torch.randn(5, 4, generator=gen) for _ in range(6)]
    joint = torch.nn.Parameter(start.clone())
    opt = torch.optim.AdamW(
        [{"params": [joint], "lr": 0.1, "weight_decay": 0.0, "column_lr": [0.02, 0.02, 1, 1]}]
    )
    left, right = (torch.nn.Parameter(start[:, s].clone()) for s in (slice(0, 2), slice(2, 4)))
    reference = torch.optim.AdamW(
        [{"params": [left], "lr": 0.002}, {"params": [right], "lr": 0.1}], weight_decay=0.0
    )
    for g in grads:
        joint.grad, left.grad, right.grad = g.clone(), g[:, :2].clone(), g[:, 2:].clone()
        step_with_column_lr(opt)
        reference.step()
    torch.testing.assert_close(joint.data, torch.cat([left.data, right.data], 1))
    assert not torch.allclose(joint.data[:, :2], start[:, :2], atol=1e-3)  # it moved, slowly


def test_the_depth_responses_take_their_own_multiple():
    model = torch.nn.Module()
    model.price_response = PriceResponse(4, 6, torch.zeros(2, 0, dtype=torch.long))
    model.other = torch.nn.Linear(2, 2)
    cfg = TrainConfig.preset("small")
    groups = param_groups(model, model, cfg)
    others = len(list(model.parameters())) - 2  # all but the categories' and products'
    assert [len(g["params"]) for g in groups] == [others, 1, 1]
    columns = groups[2]["column_lr"]
    for name, share in zip(PRODUCT_RESPONSES, columns, strict=True):
        expected = cfg.depth_lr_scale / cfg.price_lr_scale if name in DEPTH_RESPONSES else 1.0
        assert share == expected
    assert groups[1]["lr_scale"] == groups[2]["lr_scale"] == cfg.price_lr_scale


def test_the_fused_adamw_follows_the_per_tensor_loop():
    gen = torch.Generator().manual_seed(1)
    shapes = [(7, 3), (3,), (4, 4, 2)]
    fused = [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in shapes]
    loop = [torch.nn.Parameter(p.detach().clone()) for p in fused]

    def groups(ps):
        return [{"params": ps[:2]}, {"params": ps[2:], "weight_decay": 0.0, "lr": 0.3}]

    a = adamw(groups(fused), lr=0.01, weight_decay=0.01)
    b = torch.optim.AdamW(groups(loop), lr=0.01, weight_decay=0.01, foreach=False)
    assert a.defaults["fused"]
    for _ in range(20):
        for p, q in zip(fused, loop, strict=True):
            g = torch.randn(p.shape, generator=gen)
            p.grad, q.grad = g.clone(), g.clone()
        step_with_column_lr(a)
        b.step()
    for p, q in zip(fused, loop, strict=True):
        torch.testing.assert_close(p.data, q.data, rtol=1e-5, atol=1e-6)
