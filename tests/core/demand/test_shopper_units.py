"""``shopper_units`` against its oracle: each context scored alone by the model, weighted and
added up per cell; batch sizes do not change the sums."""

import numpy as np
import polars as pl
import pytest
import torch

from retailsim_core.counterfactual.simulate import basket_units
from retailsim_core.datasets.tensors import TensorConfig
from retailsim_core.demand.shopper_units import shopper_units
from retailsim_core.demand.world_demand import CONTEXT_COLUMNS
from retailsim_core.pipeline.readers.serving_inputs import load_serving_data
from retailsim_core.tables import CHECKPOINT_TABLE, TRIPS_TABLE
from retailsim_core.training.checkpoint import load_model


@pytest.fixture(scope="module")
def served(tiny_warehouse, tiny_checkpoint):
    wh = tiny_warehouse["warehouse"]
    model, _, config = load_model(tiny_checkpoint, CHECKPOINT_TABLE)
    data, _ = load_serving_data(wh, [12, 13], TensorConfig(**config["tensors"]))
    trips = wh.scan(TRIPS_TABLE).filter(pl.col("week").is_in([12, 13])).collect()
    contexts = trips.sort("basket_id").group_by("week", maintain_order=True).head(12).select(
        "customer_id", "store_id", pl.col("week").cast(pl.Int64), date=pl.col("shop_date"),
        hour=pl.col("shop_hour").cast(pl.Int64),
        weight=pl.int_range(pl.len()).cast(pl.Float64) / 10 + 0.1,
    )  # fmt: skip
    return model, data, contexts


def test_the_cells_are_the_weighted_sum_of_every_contexts_basket(served):
    model, data, contexts = served
    products = data.vocab.frame()["product_id"].head(5)
    cells = (
        contexts.select("store_id", "week").unique()
        .join(pl.DataFrame({"product_id": products}), how="cross")
        .select("product_id", "store_id", "week")
        .vstack(pl.DataFrame({"product_id": ["NOT-A-PRODUCT"], "store_id": ["S?"],
                              "week": [12]}, schema={"product_id": pl.String,
                              "store_id": pl.String, "week": pl.Int64}))
    )  # fmt: skip
    q = np.linspace(1.0, 2.0, data.vocab.size)
    got, totals = shopper_units({12: model, 13: model}, data, contexts, cells, q, batch_size=4)
    expected = np.zeros(cells.height)
    expected_totals = {12: 0.0, 13: 0.0}
    tokens = dict(data.vocab.frame().iter_rows())
    with torch.no_grad():
        for row in contexts.iter_rows(named=True):
            held = basket_units(model, data.batch(pl.DataFrame([row]).select(CONTEXT_COLUMNS)))
            held = held[0].double().numpy() * row["weight"]
            expected_totals[row["week"]] += float((held[: len(q)] * q).sum())
            for i, cell in enumerate(cells.iter_rows(named=True)):
                if (cell["store_id"], cell["week"]) == (row["store_id"], row["week"]):
                    expected[i] += held[tokens[cell["product_id"]]]
    assert got[-1] == 0.0  # an unknown product at an unknown store: no context reaches it
    assert got == pytest.approx(expected, rel=1e-5)
    assert totals == pytest.approx(expected_totals, rel=1e-5)
    again, _ = shopper_units({12: model, 13: model}, data, contexts, cells, q, batch_size=256)
    assert again == pytest.approx(got, rel=1e-6)
