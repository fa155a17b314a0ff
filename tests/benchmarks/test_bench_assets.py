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
