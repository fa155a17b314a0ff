"""The refresh's sample (new weeks, a replay of older ones, nothing later) and its fine-tuning."""

import dataclasses

import numpy as np
import polars as pl
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from retailsim_core.training.adapt.refresh import RefreshConfig, refresh_samples


def _samples(weeks: list[int], per_week: int = 5) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "basket_id": [f"B{w}_{i}" for w in weeks for i in range(per_week)],
            "week": [w for w in weeks for _ in range(per_week)],
            "truncated": [i == per_week - 1 for _ in weeks for i in range(per_week)],
            "bucket": [1] * (len(weeks) * per_week),
        }
    )


def test_new_weeks_whole_and_a_replay_from_the_weeks_before():
    samples = _samples(list(range(1, 11)))
    cfg = RefreshConfig(replay_ratio=0.5, replay_weeks=3, max_new_samples=100)
    rows = refresh_samples(samples, [8, 9], cfg)
    new, old = rows.filter(~pl.col("replay")), rows.filter(pl.col("replay"))
    assert sorted(new["basket_id"]) == sorted(
        samples.filter(pl.col("week").is_in([8, 9]))["basket_id"]
    )  # a basket of more than 50 products trains on its top 50 by price (D120)
    assert old.height == 5 and set(old["week"]) <= {5, 6, 7}  # half as many, the 3 weeks before
    assert new["truncated"].sum() == 2
    assert rows.equals(refresh_samples(samples, [8, 9], cfg))  # seeded


def test_the_new_samples_are_capped_by_a_seeded_draw():
    samples = _samples([1, 2, 3], per_week=50)
    cfg = RefreshConfig(max_new_samples=10, replay_ratio=1.0)
    rows = refresh_samples(samples, [3], cfg)
    assert (~rows["replay"]).sum() == 10 and rows["replay"].sum() == 10
    other = refresh_samples(samples, [3], dataclasses.replace(cfg, seed=1))
    assert not rows["basket_id"].equals(other["basket_id"])


def test_a_catch_up_draws_from_every_week_within_the_weeks_it_is_paid_for():
    """The chain's first refresh reads the validation weeks: its samples come from all of them,
    but its cost is ``catch_up_weeks`` weeks' worth, not one per week behind (D114)."""
    samples = _samples(list(range(1, 9)), per_week=50)
    cfg = RefreshConfig(max_new_samples=20, replay_ratio=0.5, catch_up_weeks=2)
    rows = refresh_samples(samples, [3, 4, 5, 6, 7, 8], cfg)
    new = rows.filter(~pl.col("replay"))
    assert new.height == 40 and set(new["week"]) == {3, 4, 5, 6, 7, 8}
    assert cfg.weeks_paid(6) == 2 and cfg.weeks_paid(1) == 1
    assert RefreshConfig(catch_up_weeks=0).weeks_paid(3) == 1  # every refresh pays one week


@settings(max_examples=40, deadline=None)
@given(
    weeks=st.lists(st.integers(1, 30), min_size=1, max_size=12, unique=True),
    new=st.integers(1, 30),
    replay_weeks=st.integers(0, 10),
)
def test_a_refresh_never_reads_a_later_week_than_its_newest(weeks, new, replay_weeks):
    """No future leakage: whatever the weeks on hand, every row is of a week <= the newest."""
    rows = refresh_samples(_samples(weeks), [new], RefreshConfig(replay_weeks=replay_weeks))
    assert (rows["week"] <= new).all()
    assert (rows.filter(pl.col("replay"))["week"] >= new - replay_weeks).all()


@pytest.mark.slow
def test_fine_tuning_moves_the_weights_the_same_way_for_the_same_seed(
    tiny_warehouse, tiny_checkpoint
):
    from retailsim_core.datasets.tensors import TensorConfig
    from retailsim_core.pipeline.readers.warehouse_inputs import load_model_inputs
    from retailsim_core.training.adapt.refresh import fine_tune
    from retailsim_core.training.checkpoints.checkpoint import load_model
    from retailsim_core.training.run.train_config import TrainConfig

    wh = tiny_warehouse["warehouse"]
    inputs = load_model_inputs(wh, range(6, 12))
    rows = refresh_samples(inputs.samples, [10, 11], RefreshConfig(replay_weeks=4))
    data = inputs.training_set(rows, TensorConfig(max_history_trips=50))
    states = []
    for _ in range(2):
        model, _, _ = load_model(tiny_checkpoint)
        before = {k: v.clone() for k, v in model.state_dict().items()}
        figures = fine_tune(
            model, data, rows["bucket"].to_numpy(), TrainConfig.preset("tiny"), RefreshConfig()
        )
        states.append(model.state_dict())
    assert figures["samples"] == rows.height and figures["train_total"] > 0
    assert any(not torch.equal(before[k], states[0][k]) for k in before)
    assert all(torch.equal(states[0][k], states[1][k]) for k in before)


def test_a_spent_budget_leaves_the_model_as_it_was(tiny_warehouse, tiny_checkpoint):
    from retailsim_core.datasets.tensors import TensorConfig
    from retailsim_core.pipeline.readers.warehouse_inputs import load_model_inputs
    from retailsim_core.training.adapt.refresh import fine_tune
    from retailsim_core.training.checkpoints.checkpoint import load_model
    from retailsim_core.training.run.train_config import TrainConfig

    inputs = load_model_inputs(tiny_warehouse["warehouse"], range(9, 12))
    rows = refresh_samples(inputs.samples, [11], RefreshConfig())
    data = inputs.training_set(rows, TensorConfig(max_history_trips=50))
    model, _, _ = load_model(tiny_checkpoint)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fine_tune(
        model,
        data,
        np.ones(rows.height, np.int64),
        TrainConfig.preset("tiny"),
        RefreshConfig(max_seconds=0.0),
    )
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
