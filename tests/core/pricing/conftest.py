"""A pricing panel of the tiny world: the tiny checkpoint on its test weeks, one category."""

import copy

import polars as pl
import pytest
import torch

from retailsim_core.pipeline.pricing_run import priced_categories
from retailsim_core.pipeline.readers.warehouse_inputs import load_model_inputs
from retailsim_core.pricing.panel import build_panel
from retailsim_core.training.checkpoints.checkpoint import load_model


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
    # Every other product priced, on a model whose products each list the next two of the
    # category as substitutes: unpriced columns read priced depths, priced ones each other's.
    tokens = torch.as_tensor(rows["token"].to_numpy())
    edges = torch.stack(
        [torch.cat([tokens, tokens]), torch.cat([tokens.roll(-1), tokens.roll(-2)])]
    )
    linked = with_substitutes(model, edges)
    half = build_panel(linked, weeks, batches, tokens.numpy()[::2], rows[::2])
    return {
        "panel": panel,
        "model": model,
        "half": half,
        "half_model": linked,
        "batches": batches,
        "rows": rows,
    }


def with_substitutes(model, edges: torch.Tensor):
    """A copy of ``model`` whose substitute graph is ``edges`` (2, E) src -> dst."""
    linked = copy.deepcopy(model)
    response = linked.price_response
    response.substitute_edges = edges
    degree = torch.zeros(linked.vocab_size).index_add_(0, edges[1], torch.ones(edges.shape[1]))
    response.inverse_degree = 1.0 / degree.clamp(min=1.0)
    return linked
