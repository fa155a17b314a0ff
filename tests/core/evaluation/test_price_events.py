"""The world model's two predictions per promotion event: equal where its shelf shows no
promotion, different where removing the promotion changes what it reads."""

import numpy as np
import polars as pl

from retailsim_core.evaluation.eval_config import EvalConfig
from retailsim_core.evaluation.price_events import SHELF_DEPTH, model_event_units
from retailsim_core.pipeline.evaluation_run import load_tasks


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
