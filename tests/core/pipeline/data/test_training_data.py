"""Training data (design §4.7, §5.6.0): leak-free histories as slices of one trip store."""

import numpy as np
import polars as pl
import pytest
from scipy.stats import binomtest

from retailsim_core.pipeline.data.ingest_weeks import ingest_weeks
from retailsim_core.pipeline.data.training_data_weeks import build_trip_store, training_data_weeks
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import METADATA_TABLE, SAMPLES_TABLE
from retailsim_core.datasets.tokens import PAD, ProductVocab, mask_items, pad_baskets
from retailsim_core.datasets.trips import TripStore, trips_of

SPLIT = TemporalSplit(train_end=8, valid_end=11)  # the 14 tiny weeks span all three splits
WEEKS = range(1, 15)


@pytest.fixture(scope="module")
def data(tiny_dataset, tmp_path_factory):
    wh = Warehouse(tmp_path_factory.mktemp("training") / "wh")
    ingest_weeks(tiny_dataset["raw"], wh, WEEKS)
    training_data_weeks(wh, WEEKS, SPLIT)
    store = build_trip_store(wh)
    samples = wh.scan(SAMPLES_TABLE).collect()
    bounds = store.history_bounds(samples["customer_id"], samples["week"])
    return wh, store, samples.hstack(bounds)


def test_no_future_leakage_on_every_split(data):
    """Design §5.6.0 test 1: max(history week) < basket week, for every sample."""
    _, store, samples = data
    weeks = store.trips["week"].to_numpy()
    rows = np.repeat(np.arange(samples.height), (samples["end"] - samples["start"]).to_numpy())
    idx = np.concatenate(
        [np.arange(s, e) for s, e in zip(samples["start"], samples["end"], strict=True)]
    )
    assert set(samples["split"]) == {"train", "validation", "test"}
    assert (weeks[idx] < samples["week"].to_numpy()[rows]).all()
    # ... and nothing is missing: the slice holds every earlier trip of the customer.
    trips = store.trips.select("customer_id", "week")
    counts = (
        samples.select("customer_id", "week")
        .with_row_index("i")
        .join(trips, on="customer_id", suffix="_t")
        .filter(pl.col("week_t") < pl.col("week"))
        .group_by("i")
        .len()
    )
    got = (
        samples.with_row_index("i")
        .join(counts, on="i", how="left")
        .with_columns(pl.col("len").fill_null(0))
    )
    assert (got["len"] == got["end"] - got["start"]).all()
    assert (got["history_trips"] == got["end"] - got["start"]).all()


def test_histories_are_nested_and_grow(data):
    """Design §5.6.0 test 2: the same customer at two weeks gets different, nested histories."""
    _, store, samples = data
    busy = (
        samples.group_by("customer_id")
        .agg(pl.col("week").n_unique())
        .filter(pl.col("week") >= 3)["customer_id"][0]
    )
    mine = samples.filter(pl.col("customer_id") == busy).sort("week")
    first, last = mine.row(0, named=True), mine.row(-1, named=True)
    assert first["start"] == last["start"] and first["end"] < last["end"]
    early = store.trips[first["start"] : first["end"]]["basket_id"].to_list()
    late = store.trips[last["start"] : last["end"]]["basket_id"].to_list()
    assert late[: len(early)] == early


def test_no_cross_contamination_in_a_batch(data):
    """Design §5.6.0 test 3: every history in a batch belongs to its own customer."""
    _, store, samples = data
    batch = samples.sample(64, seed=0)
    owners = store.trips["customer_id"].to_numpy()
    for cust, s, e in batch.select("customer_id", "start", "end").iter_rows():
        assert set(owners[s:e]) <= {cust}


def test_edge_cases(data):
    wh, store, samples = data
    meta = wh.scan(METADATA_TABLE).collect()
    # Case 1: a customer's first basket has an empty history and is cold start.
    first = samples.sort("week").group_by("customer_id", maintain_order=True).first()
    assert (first["end"] == first["start"]).all() and first["is_cold_start"].all()
    assert (samples.filter(pl.col("history_trips") >= 5)["is_cold_start"] == False).all()  # noqa: E712
    # Uncarded baskets have metadata but no sample.
    assert meta.filter(~pl.col("is_carded")).height > 0
    assert samples.join(meta.filter(~pl.col("is_carded")), on="basket_id", how="semi").height == 0
    # Case 3: novel products exist only after the training weeks.
    assert not meta.filter(pl.col("split") == "train")["is_novel_products"].any()
    # Case 5: a basket of more than 50 products is a sample in every split, flagged (D120).
    assert (samples["truncated"] == (samples["num_products"] > 50)).all()
    # Store and reopen memory-mapped: same trips.
    path = wh.table_dir("trip_store")
    store.save(path)
    assert TripStore.open(path).trips.equals(store.trips)


def test_tokens_eos_last_and_no_loss_on_pad_or_eos(data):
    _, store, _ = data
    vocab = ProductVocab.from_products(store.trips["products"].explode().unique().to_list())
    tokens = vocab.encode(store.trips["products"].head(200))
    assert (tokens.list.last() == vocab.eos).all()
    assert vocab.mask == vocab.n_products + 1 and vocab.eos == vocab.n_products + 2 and PAD == 0
    matrix = pad_baskets(tokens)
    batch = mask_items(matrix, vocab, 0.15, np.random.default_rng(0))
    chosen = batch.targets != PAD
    assert not (chosen & ((matrix == PAD) | (matrix == vocab.eos))).any()  # never PAD or EOS
    assert (batch.inputs[matrix == vocab.eos] == vocab.eos).all()
    assert ((batch.targets[chosen] >= 1) & (batch.targets[chosen] <= vocab.n_products)).all()
    assert chosen.any(axis=1)[(matrix > 0).any(1)].all()  # every basket trains


def test_masking_proportions():
    vocab = ProductVocab.from_products([f"P{i:04d}" for i in range(500)])
    rng = np.random.default_rng(7)
    tokens = np.concatenate(
        [rng.integers(1, 501, (4000, 20)), np.full((4000, 1), vocab.eos)], axis=1
    )
    batch = mask_items(tokens, vocab, 0.15, np.random.default_rng(42))
    chosen = batch.targets != PAD
    n, k = int((tokens <= 500).sum()), int(chosen.sum())
    assert binomtest(k, n, 0.15).pvalue > 0.001
    masked = int((batch.inputs[chosen] == vocab.mask).sum())
    kept = int((batch.inputs[chosen] == tokens[chosen]).sum())
    assert binomtest(masked, k, 0.8).pvalue > 0.001
    assert (
        binomtest(kept, k, 0.1 + 0.1 / 500).pvalue > 0.001
    )  # "unchanged" plus random hits on itself
    assert set(batch.positions[:, 0]) <= set(range(4000))
    rate20 = mask_items(tokens, vocab, 0.20, np.random.default_rng(42))
    assert binomtest(int((rate20.targets != PAD).sum()), n, 0.20).pvalue > 0.001


def test_trips_are_in_time_order_not_basket_id_order():
    """Basket ids are not chronological in LGSR: the store orders a customer's trips by date and
    hour, so the encoder's order, the last trip and recency are true to time."""
    import datetime as dt

    from retailsim_core.datasets.trips import TRIPS_SCHEMA

    def trip(basket, day, hour):
        return {
            "customer_id": "C1",
            "week": 1,
            "basket_id": basket,
            "shop_date": dt.date(2006, 4, day),
            "shop_hour": hour,
            "products": ["P1"],
        }

    frame = pl.DataFrame([trip(30, 10, 9), trip(10, 12, 18), trip(20, 12, 8), trip(5, 14, 12)])
    frame = (
        frame.with_columns(
            *[
                pl.lit(None).cast(t).alias(c)
                for c, t in TRIPS_SCHEMA.items()
                if c not in frame.columns
            ]
        )
        .select(TRIPS_SCHEMA.names())
        .cast(dict(TRIPS_SCHEMA))
    )
    store = TripStore.build(frame)
    assert store.trips["basket_id"].to_list() == [30, 20, 10, 5]
    raw = (
        frame.explode("products").rename({"products": "product_id"}).with_columns(spend=pl.lit(1.0))
    )
    assert trips_of(raw.lazy()).collect()["basket_id"].to_list() == [30, 20, 10, 5]
