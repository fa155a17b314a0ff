"""The events' planted units: the generator's exact probabilities summed over each event's
store-week baskets, with the week's cuts and with the event product's cut removed."""

import dataclasses

import numpy as np
import polars as pl
import pytest

from retailsim_core.response.planted_events import PLANTED, planted_check, planted_event_units
from retailsim_core.response.response_metrics import product_resamples
from retailsim_core.synth.oracle import purchase_probabilities, week_demand
from retailsim_core.synth.world import PlantedTruth, basket_file

WEEK = 12


@pytest.fixture(scope="module")
def planted(tiny_dataset):
    folder = tiny_dataset["truth"]
    truth = PlantedTruth.read(folder)
    world = truth.world
    baskets = pl.read_parquet(basket_file(folder, WEEK))
    busiest = baskets["store_id"].value_counts().sort("count", descending=True)["store_id"]
    store, other = busiest[0], busiest[1]
    region = world.catalogue.store_region[
        baskets.filter(pl.col("store_id") == store)["store_idx"][0]
    ]
    depth = world.prices.depth[WEEK]
    cut = int(np.flatnonzero(depth[:, region] > 0.1)[0])  # planted cut in the store's region
    uncut = int(np.flatnonzero(~depth.any(1))[0])  # no cut anywhere this week
    code = world.catalogue.product_code
    events = pl.DataFrame(
        {
            "product_id": [code[cut], code[uncut], code[cut], "PRD_NOT_PLANTED"],
            "store_id": [store, store, other, store],
            "week": pl.Series([WEEK] * 4, dtype=pl.Int32),
        }
    )
    samples = baskets.select("basket_id", "store_id", "week")
    on, off = planted_event_units(truth, samples, events)
    return dict(world=world, baskets=baskets, events=events, on=on, off=off, cut=cut,
                uncut=uncut, store=store, other=other)  # fmt: skip


def _expected(world, baskets, store, product, depth=None):
    """The oracle summed over the store's baskets; ``depth`` through a world whose plan has it."""
    if depth is not None:
        plan = world.prices.depth.copy()
        plan[WEEK] = depth
        world = dataclasses.replace(world, prices=dataclasses.replace(world.prices, depth=plan))
    b = baskets.filter(pl.col("store_id") == store)
    probs = purchase_probabilities(
        world, WEEK, b["customer_idx"].to_numpy(), b["store_idx"].to_numpy(),
        b["mission_focus"].to_list(), b["price_mode"].to_list(), b["basket_size"].to_list(),
    )  # fmt: skip
    return probs[:, product].sum()


def test_planted_units_are_the_oracle_with_and_without_the_cut(planted):
    world, baskets, cut = planted["world"], planted["baskets"], planted["cut"]
    removed = world.prices.depth[WEEK].copy()
    removed[cut] = 0.0
    for i, store in [(0, planted["store"]), (2, planted["other"])]:
        assert planted["on"][i] == pytest.approx(_expected(world, baskets, store, cut), rel=1e-9)
        without = _expected(world, baskets, store, cut, removed)
        assert planted["off"][i] == pytest.approx(without, rel=1e-9)
    assert planted["on"][0] > planted["off"][0] > 0  # the law of demand, planted
    uncut_units = _expected(world, baskets, planted["store"], planted["uncut"])
    assert planted["on"][1] == planted["off"][1] == pytest.approx(uncut_units, rel=1e-9)
    assert planted["on"][3] == planted["off"][3] == 0.0  # the truth does not name it


def test_a_depth_override_is_a_world_with_that_plan(planted):
    world = planted["world"]
    depth = world.prices.depth[WEEK].copy()
    depth[planted["cut"]] = 0.0
    plan = world.prices.depth.copy()
    plan[WEEK] = depth
    other = dataclasses.replace(world, prices=dataclasses.replace(world.prices, depth=plan))
    a, b = week_demand(world, WEEK, depth), week_demand(other, WEEK)
    for name in ("avail", "factor", "explore"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.avail, week_demand(world, WEEK).avail)


def test_the_planted_check_scores_a_method_that_predicts_the_truth_as_perfect(planted):
    events = planted["events"].head(3).with_columns(planted["on"][:3], planted["off"][:3])
    table = events.with_columns(
        exact=pl.col(PLANTED[0]), exact_off=pl.col(PLANTED[1]), flat=pl.col(PLANTED[1])
    )
    products = table.select("product_id").unique().sort("product_id")
    weights = product_resamples(products.height, 20, seed=0)
    methods = {"exact": ("exact", "exact_off"), "none": ("flat", "flat")}
    out = planted_check(table, products, methods, weights)
    exact = out["methods"]["exact"]
    assert exact["wape"] == 0.0 and exact["mean_lift_ratio"] == pytest.approx(1.0)
    assert out["methods"]["none"]["mean_lift_ratio"] == 0.0
    assert out["mean_lift"] > 0


def test_the_units_do_not_depend_on_how_many_pairs_are_scored_at_once(tiny_dataset):
    """Every cut product of two weeks in every store: one (basket, product) pair at a time
    (each product its own group) and all at once give the same bytes."""
    folder = tiny_dataset["truth"]
    truth = PlantedTruth.read(folder)
    world = truth.world
    code = world.catalogue.product_code
    frames = []
    for week in (WEEK, WEEK + 1):
        baskets = pl.read_parquet(basket_file(folder, week))
        cut = np.flatnonzero(world.prices.depth[week].any(1))[:40]
        frames.append(
            pl.DataFrame({"product_id": [code[p] for p in cut]})
            .join(baskets.select("store_id").unique(), how="cross")
            .with_columns(week=pl.lit(week, pl.Int32))
        )
    events = pl.concat(frames)
    samples = pl.concat(pl.read_parquet(basket_file(folder, w)) for w in (WEEK, WEEK + 1)).select(
        "basket_id", "store_id", "week"
    )
    one = planted_event_units(truth, samples, events, max_pairs=1)
    every = planted_event_units(truth, samples, events, max_pairs=10**9)
    for a, b in zip(one, every, strict=True):
        np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())
    assert (one[1] < one[0]).sum() > 100  # the cuts mattered where they were planted
