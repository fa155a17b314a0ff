"""Basket-aware sequences for SASRec/BERT4Rec, their sampled softmax, and BERT4Rec's inputs."""

from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F

from retailsim_core.baselines import sequential
from retailsim_core.baselines.sequential import (
    SequentialConfig,
    _bert_inputs,
    customer_sequences,
    sampled_softmax_loss,
    training_windows,
    unigram,
)
from retailsim_core.datasets.tokens import PAD, ProductVocab

VOCAB = ProductVocab(tuple(f"P{i}" for i in range(9)))  # tokens 1..9, [MASK] 10, [EOS]/[SEP] 11


def _data():
    """Two customers: trips [1, 2, 3], [4], [5, 6] and [7, 8]."""
    tokens = np.array([1, 2, 3, 4, 5, 6, 7, 8], dtype=np.int32)
    return SimpleNamespace(
        vocab=VOCAB,
        trip_tokens=tokens,
        trip_offsets=np.array([0, 3, 4, 6, 8]),
        trip_day=np.array([1, 5, 9, 3]),
        trip_customer=np.array([0, 0, 0, 1]),
    )


def test_sequences_keep_trips_in_order_with_a_sep_after_each_and_shuffle_within():
    data, sep = _data(), VOCAB.eos
    seen = set()
    for seed in range(30):
        seq = customer_sequences(
            data, np.array([0, 3]), np.array([3, 4]), 50, np.random.default_rng(seed)
        )
        row = [t for t in seq[0] if t != PAD]
        assert row[3] == sep and row[4:6] == [4, sep] and row[8] == sep  # trip boundaries
        assert sorted(row[:3]) == [1, 2, 3] and sorted(row[6:8]) == [
            5,
            6,
        ]  # a trip's products, any order
        assert [t for t in seq[1] if t != PAD] in ([7, 8, sep], [8, 7, sep])
        seen.add(tuple(row[:3]))
    assert len(seen) > 3  # reshuffled per call
    last = customer_sequences(data, np.array([0]), np.array([3]), 4, np.random.default_rng(0))
    assert last[0][0] == last[0][3] == sep and sorted(last[0][1:3]) == [
        5,
        6,
    ]  # the latest 4 tokens kept


def test_training_windows_only_hold_trips_up_to_the_last_day():
    data = _data()
    windows = training_windows(data, last_day=5, max_len=10, rng=np.random.default_rng(0))
    tokens = set(windows.ravel().tolist()) - {PAD, VOCAB.eos}
    assert tokens == {1, 2, 3, 4, 7, 8}  # day 9's trip [5, 6] left out


def test_sampled_softmax_with_every_product_and_uniform_q_is_the_full_softmax():
    g = torch.Generator().manual_seed(0)
    states, table = torch.randn(6, 4, generator=g), torch.randn(12, 4, generator=g)
    targets = torch.tensor([1, 5, 5, 9, 2, 11])
    q = torch.zeros(12)
    q[1:12] = 1.0 / 11  # every token but [PAD]
    got = sampled_softmax_loss(
        states, targets, table, q, n_negatives=2000, rng=np.random.default_rng(0)
    )
    full = F.cross_entropy(states @ table[1:].T, targets - 1)  # softmax over tokens 1..11
    torch.testing.assert_close(got, full)


def test_unigram_negatives_never_draw_pad_or_mask():
    q = unigram(np.array([[1, 1, 2, 11, 0, 0], [10, 3, 0, 0, 0, 0]]), VOCAB.size)
    assert q[PAD] == 0 and q[VOCAB.mask] == 0 and abs(float(q.sum()) - 1) < 1e-9
    assert q[1] > q[2] > 0 and q[4] == 0


def test_bert4rec_last_item_windows_end_in_sep_mask():
    sep, mask = VOCAB.eos, VOCAB.mask
    batch = torch.tensor([[1, 2, sep, 4, 5, sep, 6, sep]])
    cfg = SequentialConfig(kind="bert4rec", mask_rate=0.0, last_item_share=1.0)
    inputs, targets = _bert_inputs(batch, cfg, VOCAB, np.random.default_rng(0))
    c = int(torch.nonzero(inputs[0] == mask)[0, 0])
    assert (
        inputs[0, c - 1] == sep and (inputs[0, c + 1 :] == PAD).all()
    )  # "[SEP] [MASK]", then nothing
    assert targets[0, c] == batch[0, c] and int((targets != PAD).sum()) == 1


def test_an_epoch_starts_only_if_it_fits_in_the_time_budget(monkeypatch):
    """Every epoch takes 10 s on a fake clock: with a 25 s budget, two epochs run (a third would
    end at 30 s), although validation keeps improving."""
    clock = iter(np.arange(0.0, 1_000.0, 10.0))
    monkeypatch.setattr(sequential.time, "perf_counter", lambda: float(next(clock)))
    monkeypatch.setattr(sequential, "sequential_scores", lambda *a, **k: None)
    scores = iter(np.linspace(0.1, 0.9, 9))
    cfg = SequentialConfig(max_len=4, batch_size=2, negatives=4, max_seconds=25.0, max_epochs=9)
    _, info = sequential.fit_sequential(
        _data(), 9, np.arange(2), lambda *_: float(next(scores)), cfg
    )
    assert info["epochs"] == 2 and info["stopped_by"] == "time budget"


def _fit_on_a_fake_clock(monkeypatch, curve: list[float], **cfg) -> dict:
    """``fit_sequential`` on a clock of 10 s an epoch, validating to ``curve`` epoch by epoch."""
    clock = iter(np.arange(0.0, 1_000.0, 10.0))
    monkeypatch.setattr(sequential.time, "perf_counter", lambda: float(next(clock)))
    monkeypatch.setattr(sequential, "sequential_scores", lambda *a, **k: None)
    scores = iter(curve)
    config = SequentialConfig(max_len=4, batch_size=2, negatives=4, max_seconds=None, **cfg)
    _, info = sequential.fit_sequential(
        _data(), 9, np.arange(2), lambda *_: float(next(scores)), config
    )
    return info


def test_the_learning_curve_says_when_each_epoch_was_validated(monkeypatch):
    """On a fake clock of 10 s an epoch, the curve's seconds are each epoch's end; patience ends
    the run once validation stops improving, and the curve keeps the epochs after the best."""
    info = _fit_on_a_fake_clock(
        monkeypatch, [0.2, 0.3, 0.25, 0.28, 0.1, 0.9], max_epochs=9, patience=3, min_epochs=1
    )
    assert info["valid_curve"] == [0.2, 0.3, 0.25, 0.28, 0.1]
    assert info["curve_seconds"] == [10.0, 20.0, 30.0, 40.0, 50.0]
    assert info["best_epoch"] == 2 and info["stopped_by"] == "patience"


def test_patience_waits_for_the_minimum_epochs_after_a_flat_start(monkeypatch):
    """A curve flat at popularity for five epochs, then rising (SASRec on real LGSR): patience 3
    alone would end it at epoch 4; with ``min_epochs`` 6 it runs on and keeps the late best."""
    curve = [0.2, 0.2, 0.2, 0.2, 0.2, 0.3, 0.35, 0.34, 0.33, 0.32, 0.5]
    info = _fit_on_a_fake_clock(monkeypatch, curve, max_epochs=20, patience=3, min_epochs=6)
    assert info["valid_curve"] == curve[:10]  # three worse after epoch 7, past the minimum
    assert info["best_epoch"] == 7 and info["stopped_by"] == "patience"
