"""T1–T6 batches and the length-bucketing sampler on the tiny world."""

import numpy as np
import polars as pl
import pytest

from retailsim_core.datasets.tensors import LengthBucketSampler, TensorConfig, TrainingSet
from retailsim_core.datasets.tokens import PAD, ProductVocab, mask_items
from retailsim_core.datasets.trips import TripStore
from retailsim_core.pipeline.data.feature_weeks import store_feature_weeks
from retailsim_core.pipeline.data.ingest_weeks import ingest_weeks
from retailsim_core.pipeline.data.price_weeks import derive_price_weeks
from retailsim_core.pipeline.data.snapshot_weeks import snapshot_weeks
from retailsim_core.pipeline.data.training_data_weeks import build_trip_store, training_data_weeks
from retailsim_core.pipeline.readers.price_reader import read_price_features
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import (
    AFFINITY_TABLE,
    MISSIONS_TABLE,
    SAMPLES_TABLE,
    STORE_FEATURES_TABLE,
)

WEEKS = range(1, 15)
PRICE_FEATURES = "price_features"  # materialised on read (D96)


@pytest.fixture(scope="module")
def training_set(tiny_dataset, tmp_path_factory):
    wh = Warehouse(tmp_path_factory.mktemp("tensors") / "wh")
    ingest_weeks(tiny_dataset["raw"], wh, WEEKS)
    derive_price_weeks(wh, WEEKS)
    snapshot_weeks(wh, WEEKS)
    store_feature_weeks(wh, WEEKS)
    training_data_weeks(wh, WEEKS, TemporalSplit(8, 11))
    store = build_trip_store(wh)
    vocab = ProductVocab.from_products(store.trips["products"].explode().unique().to_list())
    samples = wh.scan(SAMPLES_TABLE).collect()
    tables = {
        t: wh.scan(t).collect() for t in (AFFINITY_TABLE, MISSIONS_TABLE, STORE_FEATURES_TABLE)
    }
    tables[PRICE_FEATURES] = read_price_features(wh, WEEKS)
    ts = TrainingSet(
        samples,
        store,
        vocab,
        tables[AFFINITY_TABLE],
        tables[MISSIONS_TABLE],
        tables[PRICE_FEATURES],
        tables[STORE_FEATURES_TABLE],
        TensorConfig(max_history_trips=20),
    )
    return ts, samples, store, tables


def test_batch_shapes_and_special_tokens(training_set):
    ts, samples, _, _ = training_set
    idx = list(range(0, samples.height, 7))
    b = ts[idx]
    B, L = b["tokens"].shape
    n_items = (b["tokens"] != PAD).sum(1) - 1
    assert B == len(idx)
    assert (b["tokens"][range(B), n_items] == ts.vocab.eos).all()  # EOS right after the items
    after = np.arange(L)[None, :] > n_items.numpy()[:, None]
    assert (b["tokens"].numpy()[after] == PAD).all()  # nothing after EOS
    assert (
        b["item_prices"].numpy()[~b["item_mask"].numpy() | (b["tokens"].numpy() == ts.vocab.eos)]
        == 0
    ).all()
    # the encoder's trips as (B * H) bags over one flat item list: every product of every trip
    assert b["history_offsets"].shape == (b["history_mask"].numel(),)
    lengths = np.diff(np.r_[b["history_offsets"].numpy(), len(b["history_items"])]).reshape(
        b["history_mask"].shape
    )
    assert (lengths[~b["history_mask"].numpy()] == 0).all()
    trip_lengths = np.diff(ts.trip_offsets)
    rows = ts.hist_start[idx][:, None] + np.arange(lengths.shape[1])[None, :]
    assert (
        lengths[b["history_mask"].numpy()] == trip_lengths[rows[b["history_mask"].numpy()]]
    ).all()
    assert b["repeat_values"].shape[:2] == b["repeat_products"].shape
    assert (
        b["customer_codes"].shape == (B, 2)
        and b["calendar"].shape == (B, 7)
        and b["basket_labels"].shape == (B, 4)
    )
    assert b["store_numeric"].shape == (B, 4) and b["customer_numeric"].shape[0] == B


def test_histories_are_strictly_before_the_basket(training_set):
    ts, samples, _, _ = training_set
    b = ts[list(range(samples.height))]
    days = b["history_days_before"].numpy()[b["history_mask"].numpy()]
    assert (days > 0).all()
    assert b["history_mask"].sum(1).max() <= 20  # capped at max_history_trips
    # ... but the history features read every earlier trip (not capped): a product bought only
    # in a trip older than the encoder's 20 is still among the basket's history products
    from retailsim_core.datasets.history_features import HISTORY_FEATURES

    n_col = HISTORY_FEATURES.index("log_history_trips")
    values, products = b["repeat_values"].numpy(), b["repeat_products"].numpy()
    trips_seen = np.expm1(values[np.arange(len(values)), 0, n_col]).round()
    has = (products != PAD).any(1)
    assert (trips_seen[has] == (ts.hist_end - ts.full_hist_start)[has]).all()
    assert (trips_seen[has] > 20).any()
    cold = samples["history_trips"].to_numpy() == 0
    assert not b["history_mask"].numpy()[cold].any()  # cold start: empty history
    assert b["history_alpha"].numpy()[samples["history_trips"].to_numpy() < 5] == pytest.approx(0.8)


def test_t4_prices_are_the_weeks_price_features(training_set):
    ts, samples, store, tables = training_set
    row = 11
    b = ts[[row]]
    sample = samples.row(row, named=True)
    basket = store.trips.filter(pl.col("basket_id") == sample["basket_id"]).row(0, named=True)
    pf = tables[PRICE_FEATURES].filter(
        (pl.col("week") == sample["week"]) & (pl.col("store_id") == basket["store_id"])
    )
    by_token = dict(zip(ts.vocab.frame()["token"], ts.vocab.frame()["product_id"], strict=True))
    for pos, token in enumerate(b["tokens"][0].tolist()):
        if 1 <= token <= ts.vocab.n_products:
            expected = pf.filter(pl.col("product_id") == by_token[token])["actual_price"][0]
            assert b["item_prices"][0, pos, 0].item() == pytest.approx(expected, rel=1e-6)
    # Items are ordered by price, highest first (the order truncation keeps).
    n = int((b["tokens"][0] != PAD).sum()) - 1
    assert (np.diff(b["item_prices"][0, :n, 0].numpy()) <= 1e-6).all()


def test_new_stores_fall_back_to_format_and_region(training_set):
    ts, samples, _, _ = training_set
    week1 = np.flatnonzero(samples["week"].to_numpy() == 1)
    b = ts[week1.tolist()]
    assert (
        b["store_is_new"].all()
        and (b["store_codes"][:, 2] == 0).all()
        and (b["store_codes"][:, :2] > 0).all()
    )
    later = np.flatnonzero(samples["week"].to_numpy() == 10)
    assert not ts[later.tolist()]["store_is_new"].all()


def test_length_bucket_sampler():
    buckets = np.array([0] * 10 + [1] * 7 + [3] * 5)
    sampler = LengthBucketSampler(buckets, batch_size=4, seed=3)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(22)) and len(batches) == len(sampler)
    assert all(len(set(buckets[b])) == 1 for b in batches)  # one bucket per batch
    assert batches == list(LengthBucketSampler(buckets, batch_size=4, seed=3))  # seeded
    sampler.set_epoch(1)
    assert list(sampler) != batches  # reshuffled per epoch
    assert all(len(b) == 4 for b in LengthBucketSampler(buckets, 4, drop_last=True))


def test_masked_batch_from_training_set(training_set):
    ts, samples, _, _ = training_set
    b = ts[list(range(64))]
    masked = mask_items(b["tokens"].numpy(), ts.vocab, 0.15, np.random.default_rng(0))
    assert (masked.targets[b["tokens"].numpy() == ts.vocab.eos] == PAD).all()


def test_gap_since_last_visit(training_set):
    """Design §4.7.5 case 2: the whole history is used and the gap is a feature."""
    ts, samples, _, _ = training_set
    b = ts[list(range(samples.height))]
    has = b["history_mask"].any(1).numpy()
    last_gap = b["history_days_before"].numpy()[has, (b["history_mask"].sum(1).numpy()[has] - 1)]
    assert np.allclose(b["calendar"].numpy()[has, 6], last_gap)
    assert (b["calendar"].numpy()[~has, 6] == -1).all()
    assert b["item_prices"].shape[2] == 9


def test_a_baskets_history_inputs_ignore_its_own_week_and_later(training_set):
    """Leakage: the encoder bags, the history features and the time gaps of a week-W basket are
    the same whether or not the trip store holds week W and later (W = 9: validation)."""
    ts, samples, store, tables = training_set
    week = 9
    rows = np.flatnonzero(
        (samples["week"].to_numpy() == week) & (samples["history_trips"].to_numpy() > 0)
    )[:40]
    early = TripStore.build(
        store.trips.filter(pl.col("week") < week).vstack(
            store.trips.filter(pl.col("basket_id").is_in(samples[rows]["basket_id"].implode()))
        )
    )
    cut = TrainingSet(
        samples[rows],
        early,
        ts.vocab,
        tables[AFFINITY_TABLE],
        tables[MISSIONS_TABLE],
        tables[PRICE_FEATURES],
        tables[STORE_FEATURES_TABLE],
        TensorConfig(max_history_trips=20),
    )
    full, part = ts[rows], cut[np.arange(len(rows))]
    for key in (
        "history_items",
        "history_offsets",
        "history_mask",
        "history_days_before",
        "history_context",
        "repeat_products",
        "repeat_values",
        "calendar",
    ):
        np.testing.assert_array_equal(full[key].numpy(), part[key].numpy(), err_msg=key)


def test_products_outside_the_vocabulary_are_counted_not_dropped(training_set):
    ts, samples, store, tables = training_set
    known = ProductVocab(
        tuple(sorted(set(ts.vocab.products) - set(ts.vocab.products[:20])))
    )  # 20 unknown
    cut = TrainingSet(
        samples,
        store,
        known,
        tables[AFFINITY_TABLE],
        tables[MISSIONS_TABLE],
        tables[PRICE_FEATURES],
        tables[STORE_FEATURES_TABLE],
        TensorConfig(max_history_trips=20),
    )
    assert (cut.item_counts + cut.item_oov == ts.item_counts).all()  # every product accounted for
    assert (
        cut.item_oov.sum() > 0
        and ((cut.item_tokens >= 1) & (cut.item_tokens <= known.n_products)).all()
    )
