"""The asset benchmark's memory sampler: every process under the root, its own peak."""

import subprocess
import sys
import time

from benchmarks.bench_assets import TreePeaks

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
