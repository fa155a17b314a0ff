"""Give the C heap's free pages back to the operating system between a loop's chunks (issue
#62, D126).

PyTorch's and NumPy's CPU buffers come from the C library's ``malloc``. glibc's raises its
mmap threshold to the largest block freed (up to 32 MB), so after a few chunks every tensor of
a (chunk, V) matrix or less is carved from the heap, and a loop whose chunks differ in size
leaves freed holes that stay resident: no live object holds them, yet the process's resident
size and its high-water mark count them. On The Complete Journey's promotion-event check the
holes grew with each chunk (+1.3 GB after 60 of its 200 chunks, given back by one
``malloc_trim``). ``malloc_trim(0)`` returns every free page of every arena, not only the top
of the heap; it is the remedy Dask's documentation gives for the same symptom in its workers.

Elsewhere (macOS, musl) there is no ``malloc_trim`` and nothing to do: the call is a no-op.
"""

from __future__ import annotations

import ctypes
import functools
import platform


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    if platform.system() != "Linux":
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (musl names its library otherwise)
        return None
    return libc if hasattr(libc, "malloc_trim") else None


def release_free_heap() -> bool:
    """Return the C heap's free pages to the operating system; True when any was returned."""
    libc = _glibc()
    return bool(libc is not None and libc.malloc_trim(0))
