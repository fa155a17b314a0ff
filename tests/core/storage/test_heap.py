"""The C heap's freed pages go back to the operating system on request (D126)."""

import os
import platform

import pytest

from retailsim_core.storage import heap
from retailsim_core.storage.heap import release_free_heap


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(heap._glibc() is None, reason="malloc_trim is glibc's")
def test_freed_holes_in_the_heap_are_given_back():
    # 64-KiB blocks come from the heap (below the mmap threshold); freeing every other one
    # leaves holes no later block fills, resident until trimmed.
    kept, freed = [], []
    for i in range(4_000):
        (kept if i % 2 else freed).append(bytearray(b"\x01" * 65_536))
    freed.clear()
    before = _resident_bytes()
    assert release_free_heap()
    assert before - _resident_bytes() > 50 * 2**20  # of about 125 MiB of holes
    assert len(kept) == 2_000 and kept[-1][-1] == 1  # the live blocks are untouched


def test_without_glibc_it_does_nothing(monkeypatch):
    monkeypatch.setattr(platform, "system", lambda: "Darwin")
    heap._glibc.cache_clear()
    try:
        assert heap._glibc() is None and release_free_heap() is False
    finally:
        heap._glibc.cache_clear()
