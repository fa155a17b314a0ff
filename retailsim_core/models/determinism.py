"""Same seed, same bytes (decision D47): PyTorch's deterministic kernels for a block of work."""

from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def deterministic_kernels(fill: bool = False):
    """PyTorch's deterministic implementations for the block, the caller's setting restored after.
    Why: with two or more threads some CPU scatter/accumulate kernels sum in a thread-dependent
    order, and over many steps the last-bit differences grow (measured on GraphSAGE: losses split
    at epoch 4, every row of the table differed; on the world model: two runs of one seed
    differed after a few epochs, though every single batch repeated exactly).

    Deterministic mode also fills every new tensor with NaN before a kernel writes it, so that a
    kernel reading memory it never wrote would fail loudly; the kernels used here write every
    element they allocate (the models' bytes are the same with ``fill`` and without, tested),
    and the fill costs time in every step of both models (D100)."""
    before = torch.are_deterministic_algorithms_enabled()
    fill_before = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = fill
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)
        torch.utils.deterministic.fill_uninitialized_memory = fill_before
