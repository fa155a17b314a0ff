"""The model's price inputs read one week at a time equal one read of the whole history (D67),
and the sets on disk equal the sets in memory (D97)."""

import mmap

import numpy as np
import polars as pl
import pytest
import torch
from polars.testing import assert_frame_equal

from retailsim_core.datasets import tensors
from retailsim_core.datasets.shelf import SHELF_FEATURES, ShelfPrices
from retailsim_core.datasets.tensors import PRICE_COLUMNS
from retailsim_core.derived_prices import DERIVED_PRICES_SCHEMA
from retailsim_core.pipeline.readers.price_reader import read_price_features
from retailsim_core.pipeline.readers.warehouse_inputs import load_model_inputs
from retailsim_core.storage.mapped import MappedArrays
from retailsim_core.tables import PRICES_TABLE, SAMPLES_TABLE

KEY = ["product_id", "store_id", "week"]


def _history_at_once(wh, weeks, inputs):
    """The construction before D67: every week's price features and observed cells in memory,
    one semi-join and one shelf build."""
    price_weeks = sorted({max(weeks[0] - 1, 1), *weeks})
    features = read_price_features(wh, price_weeks, columns=(*KEY, *PRICE_COLUMNS))
    observed = (
        wh.scan(PRICES_TABLE, price_weeks, schema=DERIVED_PRICES_SCHEMA)
        .filter(pl.col("imputation_method") == "observed")
        .select("product_id", "store_id", "store_region", "week", "discount_depth")
        .collect()
    )
    cells = (
        inputs.store.trips.filter(pl.col("basket_id").is_in(inputs.samples["basket_id"].implode()))
        .select("store_id", "week", pl.col("products").alias("product_id"))
        .explode("product_id")
        .unique()
    )
    regions = observed.select("store_id", "store_region").unique()
    shelf = ShelfPrices.build(
        features.filter(pl.col("week") < max(weeks)), observed, regions, inputs.vocab
    )
    return features.join(cells, on=KEY, how="semi"), shelf


@pytest.mark.parametrize("first", [1, 9])  # training (from week 1) and evaluation (after week 8)
def test_weekly_reads_give_the_same_prices_and_shelf(tiny_warehouse, first):
    wh = tiny_warehouse["warehouse"]
    weeks = [w for w in wh.weeks(SAMPLES_TABLE) if w >= first]
    inputs = load_model_inputs(wh, weeks)
    prices, shelf = _history_at_once(wh, weeks, inputs)
    assert_frame_equal(inputs.price_features, prices)
    keys = shelf.keys.sort("store_id", "week")
    assert keys.height > 0
    assert_frame_equal(
        inputs.shelf.keys.select("store_id", "week").sort("store_id", "week"),
        keys.select("store_id", "week"),
    )
    rows = keys["row"].to_numpy().astype(np.int64)
    weekly = inputs.shelf.rows_of(keys["store_id"], keys["week"])
    np.testing.assert_array_equal(inputs.shelf.dense(weekly), shelf.dense(rows))


def test_every_cell_gives_the_weeks_whole_price_features_from_the_same_replay(tiny_warehouse):
    """Serving's inputs: every cell of the asked weeks (oracle: a read of those weeks' price
    features), the shelf as the samples' inputs have it."""
    wh = tiny_warehouse["warehouse"]
    weeks = [12, 13]
    every = load_model_inputs(wh, weeks, every_cell=True)
    own = load_model_inputs(wh, weeks)
    assert_frame_equal(
        every.price_features, read_price_features(wh, weeks, columns=(*KEY, *PRICE_COLUMNS))
    )
    assert every.price_features.height > own.price_features.height
    assert_frame_equal(
        own.price_features.join(every.price_features, on=KEY, how="anti"),
        own.price_features.clear(),
    )
    np.testing.assert_array_equal(
        every.shelf.dense(np.arange(every.shelf.keys.height)),
        own.shelf.dense(np.arange(own.shelf.keys.height)),
    )


def test_no_week_gives_an_empty_shelf(tiny_warehouse):
    inputs = load_model_inputs(tiny_warehouse["warehouse"], [1])  # week 1 has no week before it
    empty = ShelfPrices.concat([], inputs.vocab)
    assert (
        empty.keys.height == 0
        and len(empty.indptr) == 1
        and empty.values.shape[1:] == inputs.shelf.values.shape[1:]
    )
    assert inputs.shelf.dense(np.array([-1])).shape[1:] == (inputs.vocab.size, len(SHELF_FEATURES))


def _on_map(array: np.ndarray) -> bool:
    while isinstance(array, np.ndarray | memoryview):
        array = array.obj if isinstance(array, memoryview) else array.base
    return isinstance(array, mmap.mmap)


def test_mapped_chunked_sets_equal_the_in_memory_set(tiny_warehouse, monkeypatch):
    """D97: the training's sets built a few samples at a time into mapped files, the shelf
    included, hold the in-memory set's arrays and give its batches exactly."""
    wh, weeks = tiny_warehouse["warehouse"], range(1, 12)
    memory = load_model_inputs(wh, weeks)
    full = memory.training_set(memory.samples)
    monkeypatch.setattr(tensors, "CHUNK_ROWS", 37)  # many chunks, some across weeks
    disk = load_model_inputs(wh, weeks, MappedArrays())
    mapped = disk.training_set(disk.samples)
    assert _on_map(disk.shelf.values) and _on_map(disk.shelf.tokens)
    for name in (
        "item_tokens",
        "item_prices",
        "item_starts",
        "hist_end",
        "customer_numeric",
        "basket_labels",
    ):
        assert _on_map(getattr(mapped, name)), name
    names = [k for k, v in vars(full).items() if isinstance(v, np.ndarray)]
    assert {"item_prices", "shelf_rows", "time_context", "full_hist_start"} <= set(names)
    for name in names:
        np.testing.assert_array_equal(getattr(mapped, name), getattr(full, name), err_msg=name)
    rows = np.random.default_rng(0).permutation(len(full))
    for batch in np.array_split(rows, 5):
        got, want = mapped[batch], full[batch]
        assert got.keys() == want.keys()
        for key in want:
            torch.testing.assert_close(got[key], want[key], rtol=0, atol=0, msg=key)


def test_the_inputs_replay_gives_the_evaluations_mean_prices(tiny_warehouse):
    """D128: the mean prices gathered by the inputs' replay of every week equal a replay of
    their own; a replay that stopped short of the last week is not taken for all of them."""
    from retailsim_core.pipeline.evaluation_run import mean_prices
    from retailsim_core.pipeline.readers.price_reader import PriceSums

    wh = tiny_warehouse["warehouse"]
    weeks = [w for w in wh.weeks(SAMPLES_TABLE) if w >= 9]
    sums = PriceSums()
    inputs = load_model_inputs(wh, weeks, price_sums=sums)
    assert sums.weeks == list(range(1, max(weeks) + 1))  # every week replayed, not only asked
    own = mean_prices(wh, inputs.vocab)
    np.testing.assert_array_equal(mean_prices(wh, inputs.vocab, sums), own)
    assert (own > 0).sum() > 10  # real prices compared, not zeros
    short = PriceSums()
    load_model_inputs(wh, weeks[:-2], price_sums=short)
    np.testing.assert_array_equal(mean_prices(wh, inputs.vocab, short), own)


def test_price_sums_add_in_row_order_per_product():
    """D128: per-product sums and counts over weeks, in row order (the same bits each run)."""
    from retailsim_core.pipeline.readers.price_reader import PriceSums

    sums = PriceSums()
    sums.add(1, pl.DataFrame({"product_id": ["b", "a", "b"], "actual_price": [1.0, 2.0, 3.0]}))
    sums.add(2, pl.DataFrame({"product_id": ["a"], "actual_price": [4.0]}))
    sums.add(3, pl.DataFrame(schema={"product_id": pl.String, "actual_price": pl.Float64}))
    means = sums.means().sort("product_id")
    assert means.to_dict(as_series=False) == {"product_id": ["a", "b"], "actual_price": [3.0, 2.0]}
    assert sums.weeks == [1, 2, 3]
