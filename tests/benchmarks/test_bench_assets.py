"""The asset benchmark's memory sampler: every process under the root, its own peak."""

import subprocess
import sys
import time

import pytest

from benchmarks.bench_assets import TreePeaks, asset_keys, inputs_ready

GROW = "import time; b = bytearray({mib} << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(1.5)"


def test_the_sampler_sees_each_descendants_peak():
    """A child and its grandchild touch 120 and 260 MiB: each one's peak is its own, and the
    grandchild (started by the child) is found through the tree."""
    nested = (
        "import subprocess, sys; "
        f"p = subprocess.Popen([sys.executable, '-c', {GROW.format(mib=260)!r}]); "
        + GROW.format(mib=120).replace("time.sleep(1.5)", "time.sleep(1.5); p.wait()")
    )
    child = subprocess.Popen([sys.executable, "-c", nested])
    sampler = TreePeaks(child.pid, every=0.05)
    child.wait()
    time.sleep(0.1)
    peaks = sampler.stop()
    assert child.returncode == 0
    mine = peaks[child.pid]
    others = [peak for pid, peak in peaks.items() if pid != child.pid]
    assert 120 <= mine < 200  # its own bytes and an interpreter, not the grandchild's
    assert len(others) == 1 and others[0] >= 260


def test_the_sampler_counts_each_process_cpu_seconds():
    """A child that spins for 0.8 s of CPU and then sleeps, and a grandchild that only sleeps:
    each one's CPU seconds are its own (sampled up to 0.05 s before it ends)."""
    spin = "import time; t = time.process_time()\nwhile time.process_time() - t < 0.8: pass\n"
    nested = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1.5)'])\n"
        + spin
        + "time.sleep(0.5); p.wait()"
    )
    child = subprocess.Popen([sys.executable, "-c", nested])
    sampler = TreePeaks(child.pid, every=0.05)
    child.wait()
    sampler.stop()
    assert child.returncode == 0
    others = [cpu for pid, cpu in sampler.cpu.items() if pid != child.pid]
    assert 0.8 <= sampler.cpu[child.pid] < 2.0  # the spin and an interpreter's start
    assert len(others) == 1 and others[0] < 0.5


def test_inputs_ready_is_the_last_step_a_model_reads_not_the_last_step():
    """The issue's figure ends with the last asset a model step reads: a check and an asset no
    model reads, ending later, do not count; the clock starts at the run's start."""
    spans = {
        "raw_transactions": (12.0, 20.0),
        "graphsage_embeddings": (30.0, 70.5),
        "product_graph_substitution_holdout": (71.0, 95.0),  # a check
        "late_unread_asset": (40.0, 80.0),
    }
    feeders = {"raw_transactions", "graphsage_embeddings", "store_features"}
    assert inputs_ready(10.0, spans, feeders) == (60.5, "graphsage_embeddings")
    with pytest.raises(ValueError, match="no step"):
        inputs_ready(10.0, {"late_unread_asset": (1.0, 2.0)}, feeders)


def test_the_feeders_are_the_steps_of_every_asset_a_model_asset_reads():
    """On the project's graph: the steps behind the model's inputs, a multi-asset's by its op's
    name (``training_data`` writes ``bucketed_samples``), and never a model asset's."""
    data, model, feeders = asset_keys()
    assert {"graphsage_embeddings", "training_data", "derived_prices"} <= feeders
    assert "bucketed_samples" in data and "bucketed_samples" not in feeders
    assert not feeders & set(model)
    assert "trained_checkpoint" in model and "graphsage_embeddings" in data
