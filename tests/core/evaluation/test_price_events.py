"""The world model's two predictions per promotion event: equal where its shelf shows no
promotion, different where removing the promotion changes what it reads."""

import math

import numpy as np
import polars as pl
import pytest
import torch

from retailsim_core.evaluation.eval_config import EvalConfig
from retailsim_core.evaluation.price_events import SHELF_DEPTH, model_event_units
from retailsim_core.models.heads import POOLED_RESPONSES
from retailsim_core.pipeline.evaluation_run import load_tasks
from retailsim_core.training_data.shelf import SHELF_FEATURES


def test_the_model_responds_only_where_its_shelf_shows_the_promotion(
    tiny_warehouse, tiny_checkpoint
):
    tasks = load_tasks(
        tiny_warehouse["warehouse"], tiny_warehouse["split"], EvalConfig(), tiny_checkpoint
    )
    data, samples = tasks.data, tasks.samples
    rows = np.flatnonzero(samples["split"].to_numpy() == "test")[:64]
    shelf = data[rows]["shelf"]  # (B, V, S)
    depth = shelf[..., SHELF_DEPTH].numpy()
    available = shelf[..., 3].numpy() > 0
    products = data.vocab.frame().sort("token")["product_id"].to_list()
    keys = samples[rows].select("store_id", pl.col("week").cast(pl.Int32))

    def cells(mask: np.ndarray) -> pl.DataFrame:
        b, t = np.nonzero(mask)
        return (
            keys[b]
            .with_columns(product_id=pl.Series([products[i - 1] for i in t]))
            .unique(maintain_order=True)
        )

    promoted = depth > 0.1
    # Cells shown unpromoted in every row of their store-week, at store-weeks with no promotion.
    quiet_rows = ~promoted.any(1)
    plain = cells(available & (depth == 0) & quiet_rows[:, None]).head(50)
    on, off = model_event_units(tasks.model, data, rows, samples, plain)
    assert plain.height > 0 and on.to_list() == off.to_list()
    loud = cells(promoted & available).head(50)
    on, off = model_event_units(tasks.model, data, rows, samples, loud)
    assert loud.height > 0 and (on != off).any() and ((on >= 0) & (off >= 0)).all()


def test_promotional_arc_elasticities_on_literal_products():
    from retailsim_core.evaluation.price_events import METHODS, promotional_elasticities

    lift = [math.log(1.5), math.log(2.0), 0.3]
    products = pl.DataFrame(
        {
            "product_id": ["a", "b", "c"],
            "observed_lift": lift,
            "events": [1, 1, 1],
            "depth": [0.2, 0.5, 0.02],  # c's cut is below 5%: not a promotion's price change
            **{name: [x / 2 for x in lift] for name in METHODS},
        }
    )
    out = promotional_elasticities(products)
    expected = [math.log(1.5) / math.log(0.8), math.log(2.0) / math.log(0.5)]
    assert out["products"] == 2
    assert out["observed"] == pytest.approx(np.median(expected))
    assert out["world_model"] == pytest.approx(np.median(expected) / 2)


def test_removing_a_promotion_takes_the_product_off_display_and_out_of_the_mailer(
    tiny_warehouse, tiny_checkpoint
):
    """An event on display with no price cut: the model's two predictions differ by the display
    response alone, and only for the displayed cells."""
    tasks = load_tasks(
        tiny_warehouse["warehouse"], tiny_warehouse["split"], EvalConfig(), tiny_checkpoint
    )
    data, samples, model = tasks.data, tasks.samples, tasks.model
    rows = np.flatnonzero(samples["split"].to_numpy() == "test")[:64]
    s = len(SHELF_FEATURES)
    table = data.shelf.table  # every stored cell holds its S values, zeros included
    column = table.indices % s
    table.data[column == SHELF_FEATURES.index("display")] = 1.0  # every shelf cell displayed
    with torch.no_grad():
        model.price_response.raw_category_weights[:, POOLED_RESPONSES.index("display")] = 3.0
    shelf = data[rows]["shelf"]
    undiscounted = (shelf[..., SHELF_DEPTH] == 0) & (shelf[..., 3] > 0)
    b, t = np.nonzero(undiscounted.numpy())
    products = data.vocab.frame().sort("token")["product_id"].to_list()
    events = (
        samples[rows][b]
        .select("store_id", pl.col("week").cast(pl.Int32))
        .with_columns(product_id=pl.Series([products[i - 1] for i in t]))
        .unique(maintain_order=True)
        .head(50)
    )
    on, off = model_event_units(model, data, rows, samples, events)
    assert events.height > 0 and (on > off).all()
