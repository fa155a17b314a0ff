"""Three-phase training on the tiny world: it learns, it stops early, it resumes bit-identically."""

import dataclasses
from functools import partial

import numpy as np
import polars as pl
import pytest
import torch

from retailsim_core.datasets.tokens import PAD
from retailsim_core.models.determinism import deterministic_kernels
from retailsim_core.models.world_model import WorldModelConfig
from retailsim_core.pipeline.readers.warehouse_inputs import load_model_inputs
from retailsim_core.pipeline.world_model_training import train_world_model
from retailsim_core.split import TemporalSplit
from retailsim_core.tables import CHECKPOINT_TABLE
from retailsim_core.training.checkpoints.checkpoint import load_model
from retailsim_core.training.run.loop import train
from retailsim_core.training.run.model_setup import build_model
from retailsim_core.training.run.train_config import TrainConfig
from retailsim_core.training.scoring import validation
from retailsim_core.training.scoring.validation import (
    eval_batches,
    masked_item_metrics,
    masked_item_ranks,
    next_basket_metrics_of,
    popularity_scores,
)

MODEL = WorldModelConfig.preset("tiny")


@pytest.fixture(scope="module")
def sets(tiny_warehouse):
    inputs = load_model_inputs(tiny_warehouse["warehouse"], range(1, 12))
    usable = inputs.samples.filter(~pl.col("truncated"))
    train_s = usable.filter(pl.col("split") == "train")
    return (
        inputs,
        inputs.training_set(train_s),
        train_s["bucket"].to_numpy(),
        inputs.training_set(usable.filter(pl.col("split") == "validation")),
    )


def _run(sets, tmp_path, cfg, stop=None):
    inputs, train_data, buckets, valid = sets
    model = build_model(
        MODEL, inputs.product_table, train_data.customer_numeric.shape[1], seed=cfg.seed
    )
    pop = popularity_scores(train_data, np.arange(len(train_data)))
    return model, train(
        model, train_data, buckets, valid, pop, cfg, state_dir=tmp_path, stop_after_epochs=stop
    )


def test_evaluation_batches_cover_each_row_once_ordered_by_history_then_basket_size(sets):
    valid = sets[3]
    rows = np.random.default_rng(0).permutation(len(valid))[: max(len(valid) - 3, 1)]
    batches = [batch_rows for batch_rows, _ in eval_batches(valid, rows, batch_size=7)]
    order = np.concatenate(batches)
    assert sorted(order.tolist()) == sorted(rows.tolist())
    keys = list(
        zip(valid.hist_end[order] - valid.hist_start[order], valid.item_counts[order], strict=True)
    )
    assert keys == sorted(keys) and len({len(b) for b in batches[:-1]}) <= 1


def test_masked_item_ranks_without_the_baseline_rank_the_model_alike(sets):
    inputs, train_data, _, valid = sets
    model = build_model(MODEL, inputs.product_table, train_data.customer_numeric.shape[1], seed=0)
    rows, pop = np.arange(len(valid)), popularity_scores(train_data, np.arange(len(train_data)))
    both = masked_item_ranks(model, valid, rows, pop, 0.2, seed=3)
    alone = masked_item_ranks(model, valid, rows, None, 0.2, seed=3)
    assert set(alone) == {"row", "model"} and len(both["popularity"]) == len(both["model"]) > 0
    assert (alone["model"] == both["model"]).all() and (alone["row"] == both["row"]).all()
    assert (both["model"] >= 1).all() and (both["model"] <= valid.vocab.size).all()


def test_validation_next_basket_figures_match_a_per_basket_reference(sets):
    inputs, train_data, _, valid = sets
    model = build_model(MODEL, inputs.product_table, train_data.customer_numeric.shape[1], seed=0)
    rows = np.arange(len(valid))
    got = next_basket_metrics_of(model, valid, rows)
    specials = {0, valid.vocab.eos}
    recall, ndcg = [], []
    for batch_rows, batch in eval_batches(valid, rows):
        _, scores = model.next_basket(batch)
        for i, row in enumerate(batch_rows):
            basket = {int(t) for t in batch["tokens"][i]} - specials
            top = scores[i].topk(20).indices.tolist()
            n_true = len(basket) + int(valid.item_oov[row])
            recall.append(len(basket & set(top)) / max(n_true, 1))
            dcg = sum(1 / np.log2(j + 2) for j, t in enumerate(top[:10]) if t in basket)
            ideal = sum(1 / np.log2(j + 2) for j in range(min(max(n_true, 1), 10)))
            ndcg.append(dcg / ideal)
    assert got["valid_next_R@20"] == pytest.approx(np.mean(recall), abs=1e-12)
    assert got["valid_next_NDCG@10"] == pytest.approx(np.mean(ndcg), abs=1e-12)
    assert 0 < got["valid_next_R@20"] < 1


@pytest.mark.slow
def test_interrupted_training_resumes_to_the_same_result(sets, tmp_path):
    cfg = TrainConfig.preset("tiny", seed=3)
    _, whole = _run(sets, tmp_path / "a", cfg)
    _, first = _run(sets, tmp_path / "b", cfg, stop=2)  # "crash" after two epochs
    assert first.state.epoch == 2 and not first.state.done
    _, resumed = _run(sets, tmp_path / "b", cfg)
    assert resumed.state.epoch == whole.state.epoch == 4
    assert resumed.state.history == whole.state.history  # masked-item figures of the best too
    for k, v in whole.best_weights.items():
        assert torch.equal(v, resumed.best_weights[k]), k


@pytest.mark.slow
def test_a_changed_configuration_does_not_resume_a_stale_state(sets, tmp_path):
    cfg = TrainConfig.preset("tiny", seed=3)
    inputs, train_data, buckets, valid = sets
    pop = popularity_scores(train_data, np.arange(len(train_data)))
    m = build_model(MODEL, inputs.product_table, train_data.customer_numeric.shape[1], seed=0)
    train(
        m,
        train_data,
        buckets,
        valid,
        pop,
        cfg,
        state_dir=tmp_path,
        stop_after_epochs=1,
        fingerprint="old",
    )
    m2 = build_model(MODEL, inputs.product_table, train_data.customer_numeric.shape[1], seed=0)
    res = train(
        m2,
        train_data,
        buckets,
        valid,
        pop,
        cfg,
        state_dir=tmp_path,
        stop_after_epochs=1,
        fingerprint="new",
    )
    assert res.state.epoch == 1  # started afresh


@pytest.mark.slow
def test_masked_item_figures_are_the_kept_weights_own(sets, tmp_path):
    """Selection reads next-basket NDCG@10 each epoch; the masked-item figures are taken once, for
    the weights kept, and equal what those weights score on the same rows and masks."""
    cfg = TrainConfig.preset("tiny", seed=3)
    model, res = _run(sets, tmp_path, cfg)
    inputs, train_data, _, valid = sets
    masked = [h for h in res.state.history if "valid_Hit@10" in h]
    assert [h["epoch"] for h in masked] == [res.state.best_epoch]
    assert all("valid_next_NDCG@10" in h for h in res.state.history)
    kept = build_model(MODEL, inputs.product_table, train_data.customer_numeric.shape[1], seed=0)
    kept.load_state_dict(res.best_weights)
    pop = popularity_scores(train_data, np.arange(len(train_data)))
    rows = np.arange(len(valid))
    if cfg.valid_samples is not None and len(rows) > cfg.valid_samples:
        rows = np.sort(
            np.random.default_rng([cfg.seed, 99]).choice(
                len(rows), cfg.valid_samples, replace=False
            )
        )
    expected = masked_item_metrics(kept, valid, rows, pop, cfg.valid_mask_rate, seed=cfg.seed)
    assert {k: masked[0][k] for k in expected} == expected


@pytest.mark.slow
def test_early_stopping_ends_the_main_phase(sets, tmp_path):
    phases = TrainConfig.preset("tiny").phases
    frozen = tuple(
        dataclasses.replace(p, lr=0.0, epochs=6 if p.name == "main" else p.epochs) for p in phases
    )
    cfg = dataclasses.replace(TrainConfig.preset("tiny"), phases=frozen, patience=2)
    _, res = _run(sets, tmp_path, cfg)
    main = [h for h in res.state.history if h["phase"] == "main"]
    assert len(main) == 2  # no improvement: patience 2


@pytest.mark.slow
def test_trained_checkpoint_beats_popularity_and_reloads_without_pickle(tiny_warehouse):
    wh = tiny_warehouse["warehouse"]
    cfg = dataclasses.replace(TrainConfig.preset("tiny"), samples_per_epoch=None)
    summary = train_world_model(wh, tiny_warehouse["split"], MODEL, cfg)
    best = summary.best
    assert best["valid_Hit@10"] > best["valid_popularity_Hit@10"]
    folder = wh.table_dir(CHECKPOINT_TABLE)
    assert {p.name for p in folder.iterdir()} >= {
        "model.safetensors",
        "config.json",
        "vocabulary.parquet",
    }
    assert not (folder / "training_state").exists()  # finished runs leave no resume state
    assert not any(p.suffix in (".pt", ".pkl", ".pickle") for p in folder.rglob("*"))
    model, vocab, config = load_model(folder)
    assert (
        vocab.n_products == summary.vocabulary
        and config["summary"]["best_epoch"] == summary.best_epoch
    )


@pytest.mark.slow
def test_torchrun_ddp_trains_identical_replicas(tiny_warehouse, tmp_path):
    """Two ranks under torchrun (gloo, CPU): one checkpoint, and DDP keeps the replicas
    identical.
    """
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    wh_copy = tmp_path / "wh"
    shutil.copytree(
        tiny_warehouse["warehouse"].root, wh_copy, ignore=shutil.ignore_patterns(CHECKPOINT_TABLE)
    )
    torchrun = Path(sys.executable).with_name("torchrun")
    out = subprocess.run(
        [
            str(torchrun),
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "retailsim_core.training",
            "--warehouse",
            str(wh_copy),
            "--preset",
            "tiny",
            "--train-end",
            "8",
            "--valid-end",
            "11",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    digests = {
        line.split()[1]: line.split()[-1]
        for line in out.stdout.splitlines()
        if "weights sha256" in line
    }
    assert set(digests) == {"0/2", "1/2"} and len(set(digests.values())) == 1
    assert (wh_copy / CHECKPOINT_TABLE / "model.safetensors").exists()


KILL_SCRIPT = """
import os, signal, sys
from retailsim_core.models.world_model import WorldModelConfig
from retailsim_core.pipeline.world_model_training import train_world_model
from retailsim_core.split import TemporalSplit
from retailsim_core.training.run.train_config import TrainConfig
from retailsim_core.storage.warehouse import Warehouse

def log(msg):
    if "epoch 3 (" in msg and "batch 0/" in msg:      # mid-epoch 3, after epoch 2's state was saved
        os.kill(os.getpid(), signal.SIGKILL)

train_world_model(Warehouse(sys.argv[1]), TemporalSplit(8, 11), WorldModelConfig.preset("tiny"),
                  TrainConfig.preset("tiny", seed=5), log=log)
"""


@pytest.mark.slow
def test_training_killed_mid_epoch_resumes_to_the_uninterrupted_result(tiny_warehouse, tmp_path):
    import shutil
    import subprocess
    import sys

    from safetensors.torch import load_file

    runs = {}
    for name in ("killed", "whole"):
        wh = tmp_path / name
        shutil.copytree(
            tiny_warehouse["warehouse"].root, wh, ignore=shutil.ignore_patterns(CHECKPOINT_TABLE)
        )
        runs[name] = wh
    proc = subprocess.run(
        [sys.executable, "-c", KILL_SCRIPT, str(runs["killed"])],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == -9  # SIGKILL: no clean shutdown
    state = runs["killed"] / CHECKPOINT_TABLE / "training_state"
    assert (state / "state.json").exists() and not (
        runs["killed"] / CHECKPOINT_TABLE / "model.safetensors"
    ).exists()
    from retailsim_core.storage.warehouse import Warehouse

    for name in (
        "killed",
        "whole",
    ):  # the killed run resumes from epoch 2; the other runs from scratch
        train_world_model(
            Warehouse(runs[name]), TemporalSplit(8, 11), MODEL, TrainConfig.preset("tiny", seed=5)
        )
    a = load_file(str(runs["killed"] / CHECKPOINT_TABLE / "model.safetensors"))
    b = load_file(str(runs["whole"] / CHECKPOINT_TABLE / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _popularity_in_one_pass(data, rows):
    """The reference: every item of the rows counted at once, with ``np.add.at``."""
    counts = np.zeros(data.vocab.size, dtype=np.float64)
    starts, lengths = data.item_starts[rows], data.item_counts[rows]
    idx = np.repeat(starts, lengths) + (
        np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    )
    np.add.at(counts, data.item_tokens[idx], 1.0)
    counts[[PAD, data.vocab.mask, data.vocab.eos]] = -1.0
    return counts - 1e-6 * np.arange(data.vocab.size) / data.vocab.size


def test_popularity_counted_in_chunks_equals_one_pass(sets, monkeypatch):
    data = sets[1]
    every = np.arange(len(data))
    some = np.random.default_rng(3).choice(len(data), len(data) // 2, replace=False)
    want = [_popularity_in_one_pass(data, rows) for rows in (every, some)]
    monkeypatch.setattr(validation, "POPULARITY_CHUNK", 7)  # many chunks, a short last one
    for rows, expected in zip((every, some), want, strict=True):
        np.testing.assert_array_equal(popularity_scores(data, rows), expected)
    assert (want[0][PAD + 4 :] > 0).any()


@pytest.mark.slow
def test_training_reads_no_memory_it_did_not_write(sets, tmp_path, monkeypatch):
    """Training runs without deterministic mode's NaN fill of new tensors (D100); the same
    history and weights with the fill on prove no kernel of a step (the compiled scan's
    included) read memory it had not written."""
    cfg = TrainConfig.preset("tiny", seed=5)
    _, fast = _run(sets, tmp_path / "fast", cfg)
    filling = partial(deterministic_kernels, fill=True)
    monkeypatch.setattr("retailsim_core.training.run.loop.deterministic_kernels", filling)
    assert torch.utils.deterministic.fill_uninitialized_memory
    _, slow = _run(sets, tmp_path / "slow", cfg)
    assert fast.state.history == slow.state.history
    for k, v in fast.best_weights.items():
        assert torch.equal(v, slow.best_weights[k]), k
