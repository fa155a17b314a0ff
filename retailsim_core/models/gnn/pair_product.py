"""GraphSAGE's link scores' pair products, ``unit[src] * unit[dst]``, and their row sums, with a
compiled forward and backward (``pair_product.c`` beside it) behind a feature check (D104).

Why: PyTorch gathers both (E, H) operands, multiplies them, sums the rows, and backward
multiplies the gradient by each operand and scatters both products: five (E, H) tensors through
memory per score, about half of an epoch. The kernel reads the two rows of a pair and writes
its product (:func:`pair_product`) or its row sum (:func:`pair_dot`); backward scatters
straight from the rows.

Bitwise the same as :func:`pair_product_reference` (and its ``.sum(-1)``; tested, and the
embeddings are the same bytes): the same float products, the row sum in ``torch.sum``'s order
(checked per width, :func:`sum_lanes`), each row's gradient added from zeros in the order of
the pairs, as PyTorch's deterministic ``index_add`` does, and the two gradients handed to
autograd as two inputs, the destination's first, in the order PyTorch's engine accumulated the
two ``index_select`` backward nodes. Without a compiler, for tensors other than fp32 on the
CPU, or with ``RETAILSIM_COMPILED_PAIRS=0``, the reference runs.

Glossary: N nodes; E pairs; H embedding width.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from retailsim_core import native

SOURCE = Path(__file__).parent / "pair_product.c"
# No -ffast-math and no contraction: every product and sum rounds as PyTorch's does.
COMPILE_FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fopenmp", "-fPIC")
LINK_FLAGS = ("-shared", "-fopenmp")


_PTR, _I64, _I32 = ctypes.c_void_p, ctypes.c_long, ctypes.c_int
SIGNATURES = {
    "rs_pair_product": ([_PTR] * 4 + [_I64] * 2 + [_I32], None),
    "rs_pair_dot": ([_PTR] * 4 + [_I64] * 3 + [_I32], None),
    "rs_pair_product_backward": ([_PTR] * 4 + [_I64] * 2 + [_PTR] * 2 + [_I64] * 2 + [_I32], None),
}


@functools.cache
def _library() -> ctypes.CDLL | None:
    return native.load(SOURCE, "compiled_pairs", COMPILE_FLAGS, LINK_FLAGS, SIGNATURES)


def available(unit: torch.Tensor) -> bool:
    """True when the kernel is built and ``unit`` is an fp32 CPU tensor."""
    return _library() is not None and unit.device.type == "cpu" and unit.dtype == torch.float32


def pair_product_reference(
    unit: torch.Tensor, src: torch.Tensor, dst: torch.Tensor
) -> torch.Tensor:
    """(N, H), (E,), (E,) -> (E, H): PyTorch's gathers; ``index_select``, not ``unit[src]``:
    the same rows and, backward, a deterministic index_add (D100)."""
    return unit.index_select(0, src) * unit.index_select(0, dst)


def _backward(ctx, grad: torch.Tensor):
    """Both gradients of ``unit[src] * unit[dst]`` (or of its row sums: ``grad`` (E,), read as
    the (E, H) column the sum's backward expands it to), destination's first."""
    unit, src, dst = ctx.saved_tensors
    g_src, g_dst = torch.zeros_like(unit), torch.zeros_like(unit)
    if grad.dim() == 1:
        grad_row, grad_col = grad.stride(0), 0
    else:
        grad = grad if grad.stride(1) == 0 else grad.contiguous()
        grad_row, grad_col = grad.stride(0), grad.stride(1)
    _library().rs_pair_product_backward(
        unit.data_ptr(),
        src.data_ptr(),
        dst.data_ptr(),
        grad.data_ptr(),
        grad_row,
        grad_col,
        g_src.data_ptr(),
        g_dst.data_ptr(),
        src.shape[0],
        unit.shape[1],
        _threads(),
    )
    return g_dst, g_src, None, None


class _PairProduct(torch.autograd.Function):
    @staticmethod
    def forward(ctx, unit_dst, unit_src, src, dst):
        # unit_dst and unit_src are one tensor: two inputs so that autograd adds the two
        # gradients as it added the reference's two index_select backward nodes.
        unit = unit_src.contiguous()
        e, h = src.shape[0], unit.shape[1]
        out = torch.empty((e, h), dtype=unit.dtype)
        _library().rs_pair_product(
            unit.data_ptr(), src.data_ptr(), dst.data_ptr(), out.data_ptr(), e, h, _threads()
        )
        ctx.save_for_backward(unit, src, dst)
        return out

    backward = staticmethod(_backward)


class _PairDot(torch.autograd.Function):
    @staticmethod
    def forward(ctx, unit_dst, unit_src, src, dst, lanes):
        unit = unit_src.contiguous()
        out = _dot(unit, src, dst, lanes)
        ctx.save_for_backward(unit, src, dst)
        return out

    @staticmethod
    def backward(ctx, grad):
        return (*_backward(ctx, grad), None)


def _dot(unit: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, lanes: int) -> torch.Tensor:
    out = torch.empty(src.shape[0], dtype=unit.dtype)
    _library().rs_pair_dot(
        unit.data_ptr(),
        src.data_ptr(),
        dst.data_ptr(),
        out.data_ptr(),
        src.shape[0],
        unit.shape[1],
        lanes,
        _threads(),
    )
    return out


@functools.cache
def sum_lanes(h: int) -> int | None:
    """The vector width with which the kernel's row sum adds a row of ``h`` floats as this
    machine's ``torch.sum`` does (its CPU kernel's width and ISA vary), found by comparing bytes
    on rows of widely ranging products, where any other order shows; None if no width matches
    (then the products are summed by ``torch.sum``)."""
    gen = torch.Generator().manual_seed(0)
    unit = torch.randn(64, h, generator=gen) * torch.exp(3 * torch.randn(64, h, generator=gen))
    src, dst = (torch.randint(0, 64, (512,), generator=gen) for _ in range(2))
    want = pair_product_reference(unit, src, dst).sum(-1).numpy().tobytes()
    for lanes in (8, 16):
        if h // lanes // 4 < 16 and _dot(unit, src, dst, lanes).numpy().tobytes() == want:
            return lanes
    return None


def _threads() -> int:
    return max(torch.get_num_threads(), 1)


def _checked(unit: torch.Tensor, src: torch.Tensor, dst: torch.Tensor):
    src, dst = src.contiguous().to(torch.int64), dst.contiguous().to(torch.int64)
    for index in (src, dst):  # the kernel reads rows unchecked; index_select would refuse
        if len(index) and (int(index.min()) < 0 or int(index.max()) >= unit.shape[0]):
            raise IndexError(f"pair index out of range for {unit.shape[0]} rows")
    return src, dst


def pair_dot(unit: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """(N, H), (E,), (E,) int64 -> (E,): ``(unit[src] * unit[dst]).sum(-1)``, the same bytes,
    in one compiled pass where the row sum's order is known."""
    lanes = sum_lanes(unit.shape[1]) if available(unit) else None
    if lanes is None:
        return pair_product(unit, src, dst).sum(-1)
    src, dst = _checked(unit, src, dst)
    return _PairDot.apply(unit, unit, src, dst, lanes)


def pair_product(unit: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """(N, H), (E,), (E,) int64 -> (E, H): ``unit[src] * unit[dst]``, compiled where available."""
    if not available(unit):
        return pair_product_reference(unit, src, dst)
    src, dst = _checked(unit, src, dst)
    return _PairProduct.apply(unit, unit, src, dst)
