"""Same seed, same bytes (decision D47): PyTorch's deterministic kernels for a block of work."""

from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def deterministic_kernels():
    """PyTorch's deterministic implementations for the block, the caller's setting restored after.
    Why: with two or more threads some CPU scatter/accumulate kernels sum in a thread-dependent
    order, and over many steps the last-bit differences grow (measured on GraphSAGE: losses split
    at epoch 4, every row of the table differed; on the world model: two runs of one seed
    differed after a few epochs, though every single batch repeated exactly)."""
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)
