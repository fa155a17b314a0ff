"""The explore path's time-of-year term (D69): every customer's demand for a product around the
same week a year before moves its explore score by the context's weight, and nothing else."""

import copy
import dataclasses

import torch


def test_the_explore_path_follows_the_seasonal_lift_only_when_on(tiny):
    inputs, data, model = tiny
    batch = data[list(range(8))]
    assert batch["season"].shape == (8, model.vocab_size, 2)
    lifted = 5  # a product token
    season = torch.zeros_like(batch["season"])
    season[:, lifted, 0] = 3.0
    batch = {**batch, "season": season}
    model = copy.deepcopy(model)
    with torch.no_grad():
        before = model.next_basket(batch)[1]  # (B, V)
        model.season_weights.bias.copy_(torch.tensor([1.0, 0.0]))
        after = model.next_basket(batch)[1]
        off = copy.deepcopy(model)
        off.cfg = dataclasses.replace(model.cfg, seasons=False)
        ignored = off.next_basket(batch)[1]
    assert (after[:, lifted] > before[:, lifted]).all()
    others = torch.ones(model.vocab_size, dtype=torch.bool)
    others[lifted] = False
    real = before[:, others] > -1e3  # products a slot may hold
    assert (after[:, others][real] <= before[:, others][real] + 1e-6).all()
    torch.testing.assert_close(ignored, before)
