"""Advisory file locks (``flock``): what keeps two processes apart whatever started them.

The kernel releases a lock when its process dies, so a killed writer never leaves one behind.
Used by warehouse writers (one per partition at a time) and by the model steps (one
time-budgeted step per warehouse at a time, whichever Dagster instance runs them; D113).
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive(path: Path, on_wait: Callable[[str], None] | None = None) -> Iterator[float]:
    """Hold an exclusive lock on ``path`` (created if absent); yields the seconds waited for it.
    ``on_wait`` is told once when another holder makes this one wait."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        start = time.perf_counter()
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait(f"waiting for {path}: another process holds it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield time.perf_counter() - start
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
