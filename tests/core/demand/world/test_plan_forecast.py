"""``plan_forecast`` against its oracles: with the plan on file it is ``world_model_demand``'s
forecast of the same cells; under a proposed plan it is every shopper's basket scored by the
model on the planned shelf, weighted and calibrated; units per line follow the planned
promotion through the quantity model."""

import dataclasses

import numpy as np
import polars as pl
import pytest
import torch

from retailsim_core.counterfactual.simulate import basket_units
from retailsim_core.datasets.shelf import SHELF_FEATURES
from retailsim_core.demand.world.plan_forecast import DemandInputs, plan_forecast, planned_cells
from retailsim_core.demand.world.world_demand import CONTEXT_COLUMNS
from retailsim_core.serving.plan import PlanChange, shelf_cells

AVAILABLE, DISPLAY = SHELF_FEATURES.index("available"), SHELF_FEATURES.index("display")


@pytest.fixture(scope="module")
def planning(tiny_world_demand, tiny_service):
    """The inputs, the busiest forecast store-week and eight of its panel's products."""
    root = tiny_world_demand["root"]
    inputs = DemandInputs.read(root / "out")
    busiest = (
        inputs.contexts.group_by("store_id", "week").agg(n=pl.len(), date=pl.col("date").first())
        .sort("n", "store_id", "week", descending=[True, False, False]).row(0, named=True)
    )  # fmt: skip
    frame = pl.read_parquet(root / "out" / "world_model_demand.parquet").filter(
        (pl.col("store_id") == busiest["store_id"]) & (pl.col("week") == busiest["week"])
    )
    cells = frame.sort("world_model_buyers", "product_id", descending=[True, False]).head(8)
    tokens = tiny_service.tokens_of(cells["product_id"].to_list(), "product_ids")
    return inputs, busiest, cells, tokens


def _forecast(service, inputs, at, tokens, changes):
    return plan_forecast(service.model, service.data, inputs, at["store_id"], at["date"],
                         tokens, changes)  # fmt: skip


def test_the_plan_on_file_is_the_world_model_demands_forecast(
    planning, tiny_service, tiny_world_demand
):
    inputs, at, cells, tokens = planning
    models = set(tiny_world_demand["scores"]["models"].values())
    assert models == {tiny_service.checkpoint_id}  # the same model forecast the file's cells
    table = _forecast(tiny_service, inputs, at, tokens, [PlanChange()] * len(tokens))
    assert table["product_id"].to_list() == cells["product_id"].to_list()
    assert table["buyers"].equals(table["buyers_on_file"]) and table["units"].equals(
        table["units_on_file"]
    )
    assert table["buyers_on_file"].to_numpy() == pytest.approx(
        cells["world_model_buyers"].to_numpy(), rel=1e-4
    )
    same = (table["promotion_on_file"] == cells["promotion"]).to_numpy()
    assert same.any()
    assert table["units_on_file"].to_numpy()[same] == pytest.approx(
        cells["world_model"].to_numpy()[same], rel=1e-4
    )


def test_a_plan_is_every_shoppers_basket_on_the_planned_shelf(planning, tiny_service):
    """A price cut on one product and a display on another: each shopper's basket scored by
    the model on a shelf with those cells replaced, weighted by the expected trips, times the
    calibration factor (every other product's share moves with them: the basket is mixed
    again)."""
    inputs, at, _, tokens = planning
    here = inputs.contexts.filter(
        (pl.col("store_id") == at["store_id"]) & (pl.col("week") == at["week"])
    )
    # The price cut goes to a product the file does not discount: 0.6 x its regular price is
    # then a cut, whatever the file's price was.
    shelf = tiny_service.data.batch(here.head(1).select(CONTEXT_COLUMNS))["shelf"][0]
    depth = shelf[torch.as_tensor(tokens), SHELF_FEATURES.index("discount_depth")].numpy()
    first = int(np.flatnonzero(depth == 0)[0])
    tokens = [tokens[first], *(t for i, t in enumerate(tokens) if i != first)]
    changes = [PlanChange(price_multiplier=0.6), PlanChange(display=True)]
    changes += [PlanChange()] * (len(tokens) - 2)
    table = _forecast(tiny_service, inputs, at, tokens, changes)
    expected = np.zeros(len(tokens))
    moved = torch.as_tensor(tokens[:2])
    with torch.no_grad():
        for row in here.iter_rows(named=True):
            batch = tiny_service.data.batch(pl.DataFrame([row]).select(CONTEXT_COLUMNS))
            batch["shelf"][0, moved] = planned_cells(batch["shelf"][0, moved], changes[:2])
            held = basket_units(tiny_service.model, batch)[0].double().numpy()
            expected += held[tokens] * row["weight"]
    assert table["buyers"].to_numpy() == pytest.approx(inputs.factor * expected, rel=1e-4)
    assert table["buyers"][0] != table["buyers_on_file"][0]  # the cut moves the product
    assert table["promotion"][1] == "display"
    assert table["units_per_line"][2:].equals(table["units_per_line_on_file"][2:])


def test_units_per_line_follow_the_planned_promotion(planning, tiny_service):
    inputs, at, _, tokens = planning
    inputs = dataclasses.replace(inputs, coefficients={"display": 0.5, "mailer": 0.25})
    changes = [PlanChange(display=True, mailer=True)] + [PlanChange()] * (len(tokens) - 1)
    table = _forecast(tiny_service, inputs, at, tokens, changes)
    mean = inputs.lines.filter(pl.col("product_id") == table["product_id"][0])["mean_quantity"]
    mean = float(mean[0]) if len(mean) else inputs.mean_quantity
    assert table["promotion"][0] == "display+mailer"
    assert table["units_per_line"][0] == pytest.approx(1 + (mean - 1) * np.exp(0.75))
    assert table["units"][0] == pytest.approx(table["buyers"][0] * table["units_per_line"][0])


def test_units_per_line_stock_up_on_a_planned_cut(planning, tiny_service):
    inputs, at, _, tokens = planning
    inputs = dataclasses.replace(inputs, coefficients={"log_price_index": -1.5})
    changes = [PlanChange(price_multiplier=0.5)] + [PlanChange()] * (len(tokens) - 1)
    table = _forecast(tiny_service, inputs, at, tokens, changes)
    shelf = shelf_cells(tiny_service.data, at["store_id"], at["date"], np.asarray(tokens[:1]))
    depth = SHELF_FEATURES.index("discount_depth")
    on_file, planned = float(shelf[0, depth]), float(planned_cells(shelf, changes[:1])[0, depth])
    assert planned > on_file
    mean = inputs.lines.filter(pl.col("product_id") == table["product_id"][0])["mean_quantity"]
    mean = float(mean[0]) if len(mean) else inputs.mean_quantity
    for column, d in (("units_per_line_on_file", on_file), ("units_per_line", planned)):
        assert table[column][0] == pytest.approx(1 + (mean - 1) * (1 - d) ** -1.5, rel=1e-5)
    assert table["units_per_line"][1:].equals(table["units_per_line_on_file"][1:])


def test_planned_cells_keep_what_the_plan_does_not_say():
    cells = torch.tensor(
        [[-0.1, 0.2, 1.0, 1.0, 0.0, 1.0],  # on promotion, in the mailer
         [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]  # not on the shelf
    )  # fmt: skip
    out = planned_cells(
        cells,
        [
            PlanChange(display=True, price_multiplier=0.5),
            PlanChange(display=True, mailer=True, price_multiplier=0.5),
        ],
    )
    assert out[0, 0] == pytest.approx(-0.1 + np.log(0.5))
    assert out[0, DISPLAY] == 1.0 and out[0, SHELF_FEATURES.index("mailer")] == 1.0
    assert (out[1] == cells[1]).all()  # an unavailable product stays off the shelf
