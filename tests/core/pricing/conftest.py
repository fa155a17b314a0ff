"""A pricing panel of the tiny world: the tiny checkpoint on its test weeks, one category."""

import polars as pl
import pytest

from retailsim_core.pipeline.pricing_run import priced_categories
from retailsim_core.pipeline.world_model_training import load_model_inputs
from retailsim_core.pricing.panel import build_panel
from retailsim_core.training.checkpoint import load_model


@pytest.fixture(scope="package")
def tiny_pricing(tiny_checkpoint, tiny_warehouse):
    wh, split = tiny_warehouse["warehouse"], tiny_warehouse["split"]
    model, vocab, _ = load_model(tiny_checkpoint)
    weeks = [12, 13, 14]
    inputs = load_model_inputs(wh, weeks)
    products = priced_categories(wh, split, inputs.id_map, vocab.frame())
    category = (
        products.group_by("category").len().sort("len", "category", descending=[True, False])
    )["category"][0]
    rows = products.filter(pl.col("category") == category)
    batches = []
    for w in weeks:
        week = inputs.samples.filter(pl.col("week") == w).sort("basket_id").head(6)
        data = inputs.training_set(week)
        batches.append(data[list(range(len(data)))])
    panel = build_panel(model, weeks, batches, rows["token"].to_numpy(), rows)
    return {"panel": panel, "model": model, "batches": batches, "rows": rows}
