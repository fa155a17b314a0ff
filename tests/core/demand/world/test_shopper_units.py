"""``shopper_units`` against its oracle: each context scored alone by the model, weighted and
added up per cell; batch sizes do not change the sums; the unpromoted forecast equals the model
scored on a shelf whose promoted cells were put back to their regular prices."""

import numpy as np
import polars as pl
import pytest
import torch

from retailsim_core.counterfactual.simulate import basket_units
from retailsim_core.datasets.shelf import SHELF_FEATURES
from retailsim_core.datasets.tensors import TensorConfig
from retailsim_core.demand.world.shopper_units import shopper_units
from retailsim_core.demand.world.world_demand import CONTEXT_COLUMNS
from retailsim_core.pipeline.readers.serving_inputs import load_serving_data
from retailsim_core.response.price_events import without_promotion
from retailsim_core.tables import CHECKPOINT_TABLE, TRIPS_TABLE
from retailsim_core.training.checkpoints.checkpoint import load_model


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
    units = shopper_units({12: model, 13: model}, data, contexts, cells, q, batch_size=4)
    got, totals = units.buyers, units.totals
    assert (units.buyers_unpromoted == got).all()  # nothing promoted is taken away
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
    again = shopper_units({12: model, 13: model}, data, contexts, cells, q, batch_size=256)
    assert again.buyers == pytest.approx(got, rel=1e-6)


def test_the_totals_count_each_lines_units_on_its_own_shelf(served):
    """The calibration's totals read units per line as the forecast does (D133): moved by the
    quantity model at each context's display, mailer and discount."""
    model, data, contexts = served
    cells = pl.DataFrame(schema={"product_id": pl.String, "store_id": pl.String,
                                 "week": pl.Int64})  # fmt: skip
    q = np.linspace(1.0, 2.0, data.vocab.size)
    coef = {"display": 0.3, "mailer": 0.2, "log_price_index": -1.0}
    got = shopper_units({12: model, 13: model}, data, contexts, cells, q, coefficients=coef)
    expected = {12: 0.0, 13: 0.0}
    with torch.no_grad():
        for row in contexts.iter_rows(named=True):
            batch = data.batch(pl.DataFrame([row]).select(CONTEXT_COLUMNS))
            held = basket_units(model, batch)[0].double().numpy() * row["weight"]
            shelf = batch["shelf"][0].double().numpy()  # (V, S)
            depth, display, mailer = (shelf[:, SHELF_FEATURES.index(f)]
                                      for f in ("discount_depth", "display", "mailer"))  # fmt: skip
            per_line = 1 + (q - 1) * np.exp(0.3 * display + 0.2 * mailer
                                            - np.log(1 - np.clip(depth, 0, 0.95)))  # fmt: skip
            expected[row["week"]] += float((held[: len(q)] * per_line).sum())
    assert got.totals == pytest.approx(expected, rel=1e-5)
    plain = shopper_units({12: model, 13: model}, data, contexts, cells, q)
    assert plain.totals != got.totals  # the tiny shelves have discounts: the totals move


def test_the_unpromoted_forecast_is_the_model_on_the_regular_shelf(served):
    model, data, contexts = served
    shelves = data.batch(contexts.select(CONTEXT_COLUMNS))["shelf"]  # (C, V, S)
    depths = shelves[..., SHELF_FEATURES.index("discount_depth")]  # (C, V)
    cut = depths > 1e-6
    first = int(cut.sum(1).argmax())  # the context whose store-week discounts most
    store, week = contexts["store_id"][first], contexts["week"][first]
    here = contexts.filter((pl.col("store_id") == store) & (pl.col("week") == week))
    depth = depths[first]
    tokens = torch.argsort(-depth)[: min(3, int(cut[first].sum()))]  # its deepest discounts
    assert len(tokens) and (depth[tokens] > 1e-6).all()
    products = data.vocab.frame().filter(pl.col("token").is_in(tokens.tolist()))["product_id"]
    promoted = pl.DataFrame({"product_id": products, "store_id": store, "week": week})
    other = contexts.filter(pl.col("store_id") != store)["store_id"][0]
    cells = pl.concat([promoted, promoted.with_columns(store_id=pl.lit(other))])
    q = np.ones(data.vocab.size)
    units = shopper_units({12: model, 13: model}, data, here, cells, q, promoted=promoted)
    expected = np.zeros(cells.height)
    with torch.no_grad():
        for row in here.iter_rows(named=True):
            batch = data.batch(pl.DataFrame([row]).select(CONTEXT_COLUMNS))
            regular = batch["shelf"][0, tokens]
            batch["shelf"][0, tokens] = without_promotion(regular)
            held = basket_units(model, batch)[0].double().numpy() * row["weight"]
            for i, p in enumerate(cells["product_id"].head(promoted.height)):
                expected[i] += held[
                    data.vocab.frame().filter(pl.col("product_id") == p)["token"][0]
                ]
    n = promoted.height
    assert units.buyers_unpromoted[:n] == pytest.approx(expected[:n], rel=1e-5)
    # the tiny model's price response has no sign to rely on; the discount moves the forecast
    assert (units.buyers_unpromoted[:n] != units.buyers[:n]).all()
    assert (units.buyers_unpromoted[n:] == units.buyers[n:]).all()  # another store: unchanged
