"""The world model's two predictions per promotion event: equal where its shelf shows no
promotion, different where removing the promotion changes what it reads."""

import dataclasses
import math

import numpy as np
import polars as pl
import pytest
import torch

from retailsim_core.counterfactual.simulate import basket_units
from retailsim_core.datasets.shelf import SHELF_FEATURES, with_price_multipliers
from retailsim_core.models.heads.products import POOLED_RESPONSES
from retailsim_core.next_basket.eval_config import EvalConfig
from retailsim_core.pipeline.evaluation_run import load_tasks
from retailsim_core.response.price_events import SHELF_DEPTH, model_event_units
from tests.core.pricing.conftest import with_substitutes


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
        return as_events(
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
    # Oracle: one decoder pass for both shelves equals two full forward passes.
    reference = [two_passes(tasks.model, data, rows, samples, loud, p) for p in (True, False)]
    assert on.to_list() == pytest.approx(reference[0], rel=1e-5)
    assert off.to_list() == pytest.approx(reference[1], rel=1e-5)


def test_removing_a_promotion_moves_the_products_reading_it_as_a_substitute(
    tiny_warehouse, tiny_checkpoint
):
    """The fast path rescores the event products and the products whose substitutes' depth
    reads them: an oracle on a model where every promoted product feeds the next token."""
    tasks = load_tasks(
        tiny_warehouse["warehouse"], tiny_warehouse["split"], EvalConfig(), tiny_checkpoint
    )
    data, samples = tasks.data, tasks.samples
    rows = np.flatnonzero(samples["split"].to_numpy() == "test")[:64]
    depth = data[rows]["shelf"][..., SHELF_DEPTH].numpy()
    products = data.vocab.frame().sort("token")["product_id"].to_list()
    keys = samples[rows].select("store_id", pl.col("week").cast(pl.Int32))
    b, t = np.nonzero(depth > 0.1)
    loud = as_events(
        keys[b]
        .with_columns(product_id=pl.Series([products[i - 1] for i in t]))
        .unique(maintain_order=True)
        .head(50)
    )
    src = torch.as_tensor(np.unique(t))
    dst = src % data.vocab.n_products + 1  # the next product token
    model = with_substitutes(tasks.model, torch.stack([src, dst]))
    with torch.no_grad():
        model.price_response.raw_product_weights[:, 1] = 2.0  # substitutes' depth: -2.1
    on, off = model_event_units(model, data, rows, samples, loud)
    reference = [two_passes(model, data, rows, samples, loud, p) for p in (True, False)]
    assert on.to_list() == pytest.approx(reference[0], rel=1e-5)
    assert off.to_list() == pytest.approx(reference[1], rel=1e-5)


def as_events(cells: pl.DataFrame, kind: str = "price", depth: float | None = None):
    """``cells`` (store_id, week, product_id) as events of one ``kind`` and known ``depth``."""
    return cells.with_columns(kind=pl.lit(kind), depth=pl.lit(depth, dtype=pl.Float64))


def two_passes(model, data, rows, samples, events, promoted: bool) -> list[float]:
    """Each event's units from ``basket_units`` on the shelf with the event's promotion told
    (``promoted``: its known depth, else the shelf's) or removed: the reference of
    ``model_event_units``."""
    tokens = dict(data.vocab.frame().select("product_id", "token").iter_rows())
    keys = samples[rows].select("store_id", pl.col("week").cast(pl.Int32)).with_row_index("b")
    cells = keys.join(events.with_row_index("event"), on=["store_id", "week"])
    b, e = cells["b"].to_numpy(), cells["event"].to_numpy()
    t = np.array([tokens[p] for p in cells["product_id"]])
    batch = data[rows]
    shelf = batch["shelf"]
    depth = shelf[b, t, SHELF_DEPTH].clamp(max=0.95)
    log_m = torch.zeros(len(rows), shelf.shape[1])
    log_m[b, t] = -torch.log1p(-depth)
    if promoted:
        known = torch.tensor(cells["depth"].fill_null(np.nan).to_numpy())
        told = torch.where(known.isnan(), depth.double(), known).float()
        log_m[b, t] += torch.log1p(-told)
    shelf = with_price_multipliers(shelf, log_m)
    if not promoted:
        for name in ("display", "mailer"):
            shelf[b, t, SHELF_FEATURES.index(name)] = 0.0
    with torch.no_grad():
        units = basket_units(model, {**batch, "shelf": shelf})[b, t].numpy()
    out = np.zeros(events.height)
    np.add.at(out, e, units)
    return out.tolist()


def test_the_model_is_told_the_events_known_depth(tiny_warehouse, tiny_checkpoint):
    """Events whose shelf shows no cut but whose promotion says 30% (D93): the model's two
    predictions differ, and equal two full passes on the told and the regular shelves. (Their
    sign is the model's: the tiny model's price-level weight w(h) may have either.)"""
    tasks = load_tasks(
        tiny_warehouse["warehouse"], tiny_warehouse["split"], EvalConfig(), tiny_checkpoint
    )
    data, samples = tasks.data, tasks.samples
    rows = np.flatnonzero(samples["split"].to_numpy() == "test")[:64]
    shelf = data[rows]["shelf"]  # (B, V, S)
    quiet = (shelf[..., SHELF_DEPTH] == 0) & (shelf[..., 3] > 0)
    b, t = np.nonzero(quiet.numpy())
    products = data.vocab.frame().sort("token")["product_id"].to_list()
    keys = samples[rows].select("store_id", pl.col("week").cast(pl.Int32))
    cells = keys[b].with_columns(product_id=pl.Series([products[i - 1] for i in t]))
    events = as_events(cells.unique(maintain_order=True).head(50), depth=0.3)
    on, off = model_event_units(tasks.model, data, rows, samples, events)
    assert events.height > 0 and (on != off).all()
    reference = [two_passes(tasks.model, data, rows, samples, events, p) for p in (True, False)]
    assert on.to_list() == pytest.approx(reference[0], rel=1e-5)
    assert off.to_list() == pytest.approx(reference[1], rel=1e-5)
    untold = model_event_units(
        tasks.model, data, rows, samples, as_events(events.drop("kind", "depth"))
    )
    assert untold[0].to_list() == untold[1].to_list()  # shelf unpromoted and nothing told


def test_promotional_arc_elasticities_on_literal_products():
    from retailsim_core.response.price_events import METHODS, promotional_elasticities

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
    values = data.shelf.values.copy()  # the loaded shelf is a read-only map
    values[:, SHELF_FEATURES.index("display")] = 1.0  # every shelf cell displayed
    data.shelf = dataclasses.replace(data.shelf, values=values)
    with torch.no_grad():
        model.price_response.raw_category_weights[:, POOLED_RESPONSES.index("display")] = 3.0
    shelf = data[rows]["shelf"]
    undiscounted = (shelf[..., SHELF_DEPTH] == 0) & (shelf[..., 3] > 0)
    b, t = np.nonzero(undiscounted.numpy())
    products = data.vocab.frame().sort("token")["product_id"].to_list()
    events = as_events(
        samples[rows][b]
        .select("store_id", pl.col("week").cast(pl.Int32))
        .with_columns(product_id=pl.Series([products[i - 1] for i in t]))
        .unique(maintain_order=True)
        .head(50)
    )
    on, off = model_event_units(model, data, rows, samples, events)
    assert events.height > 0 and (on > off).all()
