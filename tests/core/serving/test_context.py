"""A served context equal to an evaluated basket gets the evaluated basket's inputs and scores."""

import numpy as np
import polars as pl
import pytest
import torch

from retailsim_core.datasets.batch import Batch
from retailsim_core.datasets.tensors import TensorConfig
from retailsim_core.pipeline.readers.warehouse_inputs import load_model_inputs
from retailsim_core.serving.context import CONTEXT_SCHEMA
from retailsim_core.serving.scorer import world_model_scorer

HONEST_KEYS = (
    "history_items",
    "history_offsets",
    "history_mask",
    "history_context",
    "history_days_before",
    "repeat_products",
    "repeat_values",
    "customer_codes",
    "customer_numeric",
    "history_alpha",
    "calendar",
    "store_codes",
    "store_numeric",
    "store_is_new",
    "shelf",
)


@pytest.fixture(scope="module")
def evaluated(tiny_service, tiny_warehouse):
    """The test baskets of customers with history, as the evaluation builds them."""
    data = tiny_service.data
    inputs = load_model_inputs(tiny_warehouse["warehouse"], list(data.weeks))
    samples = inputs.samples.filter(pl.col("history_trips") > 0)
    training = inputs.training_set(samples, data.tensor_cfg)
    trips = inputs.store.trips.select(
        "basket_id", "store_id", pl.col("shop_date").alias("date"), pl.col("shop_hour")
    )
    contexts = (
        samples.select("basket_id", "customer_id")
        .join(trips, on="basket_id", how="left", maintain_order="left")
        .select("customer_id", "store_id", "date", pl.col("shop_hour").cast(pl.Int64).alias("hour"))
    )
    return training, contexts.cast(dict(CONTEXT_SCHEMA))


def test_a_context_gets_the_inputs_of_the_evaluated_basket(tiny_service, evaluated):
    training, contexts = evaluated
    rows = np.arange(min(len(training), 64))
    expected = training[rows]
    served = tiny_service.data.batch(contexts[rows])
    assert len(rows) > 10
    for key in HONEST_KEYS:
        torch.testing.assert_close(served[key], expected[key], rtol=0, atol=0, msg=key)
    assert not served["basket_labels"].any()  # nothing of the basket is known
    assert not served["cold_start"].any()


def test_served_and_training_batches_have_the_same_keys_and_dtypes(tiny_service, evaluated):
    training, contexts = evaluated
    trained, served = training[np.arange(4)], tiny_service.data.batch(contexts[:4])
    assert set(served) - set(trained) == {"cold_start"}  # serving says who is new
    assert set(trained) - set(served) == {"tokens", "item_mask"}  # the basket, not yet known
    assert set(served) | set(trained) <= set(Batch.__annotations__)
    shared = set(served) & set(trained)
    assert {k: served[k].dtype for k in shared} == {k: trained[k].dtype for k in shared}


def test_served_scores_equal_the_evaluated_world_model_scores(tiny_service, evaluated):
    training, contexts = evaluated
    rows = np.arange(min(len(training), 64))
    expected = world_model_scorer(tiny_service.model)(rows, training[rows])
    served = tiny_service.log_probs(tiny_service.data.batch(contexts[rows]))
    torch.testing.assert_close(served, expected, rtol=0, atol=1e-6)


def test_history_ends_before_the_context_week(tiny_service, evaluated):
    """No future leakage: a context of week W reads trips of weeks < W only, whatever its day
    within the week (the Monday and the Sunday of a week see the same history)."""
    _, contexts = evaluated
    data = tiny_service.data
    some = contexts[:64]
    offset = some["date"].dt.weekday().to_numpy() - 1  # days since the week's Monday
    monday = some.with_columns(pl.col("date") - pl.duration(days=pl.col("date").dt.weekday() - 1))
    sunday = monday.with_columns(pl.col("date") + pl.duration(days=6))
    batch = data.batch(some)
    mask = batch["history_mask"].numpy()
    days_before = batch["history_days_before"].numpy()
    assert mask.any()
    assert (days_before[mask] > np.repeat(offset, mask.sum(1))).all()  # before the Monday
    for other in (data.batch(monday), data.batch(sunday)):
        assert torch.equal(other["history_items"], batch["history_items"])
        assert torch.equal(other["repeat_products"], batch["repeat_products"])


def test_a_new_customer_is_a_cold_start_with_an_empty_history(tiny_service, evaluated):
    _, contexts = evaluated
    new = contexts[:1].with_columns(pl.lit(None, pl.String).alias("customer_id"))
    batch = tiny_service.data.batch(new)
    assert batch["cold_start"].tolist() == [True]
    assert not batch["history_mask"].any()
    assert (batch["repeat_products"] == 0).all()
    assert (batch["customer_numeric"] == 0).all()


def test_a_store_without_a_row_that_week_is_named_not_indexed(tiny_service, evaluated):
    _, contexts = evaluated
    stranger = contexts[:1].with_columns(pl.lit("STORE99999").alias("store_id"))
    with pytest.raises(ValueError, match="STORE99999"):
        tiny_service.data.batch(stranger)


def test_a_fixed_history_width_pads_without_changing_scores(tiny_service, evaluated):
    _, contexts = evaluated
    data = tiny_service.data
    width = data.tensor_cfg.max_history_trips
    free, fixed = data.batch(contexts[:8]), data.batch(contexts[:8], history_width=width)
    assert fixed["history_mask"].shape[1] == width
    torch.testing.assert_close(
        tiny_service.log_probs(fixed), tiny_service.log_probs(free), rtol=0, atol=1e-5
    )


def test_tensor_config_is_the_checkpoints(tiny_service):
    assert isinstance(tiny_service.data.tensor_cfg, TensorConfig)
    assert tiny_service.data.tensor_cfg.__dict__ == tiny_service.config["tensors"]
