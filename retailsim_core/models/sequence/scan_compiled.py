"""The compiled CPU selective scan (``selective_scan.c`` beside it), loaded through ctypes.

Why: on a CPU the tensor-op scans (``mamba.selective_scan_ref``, ``scan.selective_scan_fast``)
stream the (B, E, N) state through memory once per elementwise op, so they are memory-bound;
the C kernel keeps a block of channels' states in L1 and does each step in one vectorised pass.

Feature check, like ``mamba_ssm`` on CUDA: the kernel is built on first use (``native.load``:
the system C compiler with OpenMP, a per-user cache, ctypes). If there is no compiler, the build
fails, the tensors are not fp32 on the CPU, or ``RETAILSIM_COMPILED_SCAN=0`` is set,
``available()`` is False and callers use the pure-PyTorch scans, which stay the tested reference.

Determinism: the kernel's work units and sums do not depend on the thread count, so results are
bitwise identical for any ``torch.get_num_threads()`` (tested).
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from retailsim_core import native

SOURCE = Path(__file__).parent / "selective_scan.c"
# -ffast-math lets gcc call glibc's vectorised expf; it is given only when compiling, not when
# linking, so crtfastmath.o (which would flush denormals for the whole process) is not linked.
COMPILE_FLAGS = ("-O3", "-ffast-math", "-march=native", "-fopenmp", "-fPIC")
LINK_FLAGS = ("-shared", "-fopenmp", "-lm")
GROUPS = 8  # channel groups per batch row: fixed, so results do not depend on threads


_PTR, _I64, _I32 = ctypes.c_void_p, ctypes.c_long, ctypes.c_int
SIGNATURES = {
    "rs_scan_forward": ([_PTR] * 7 + [_I64] * 6 + [_I32], None),
    "rs_scan_backward": ([_PTR] * 12 + [_I64] * 6 + [_I32], None),
    "rs_scan_max_state": ([], _I64),
    "rs_conv_silu": ([_PTR] * 5 + [_I64] * 4 + [_I32], None),
    "rs_gated_scan": ([_PTR] * 9 + [_I64] * 7 + [_I32], None),
}


@functools.cache
def _library() -> ctypes.CDLL | None:
    return native.load(SOURCE, "compiled_scan", COMPILE_FLAGS, LINK_FLAGS, SIGNATURES)


def available(*scan_inputs: torch.Tensor) -> bool:
    """True when the kernel is built and, if given, the scan's (x, delta, A, Bm, Cm) are fp32 CPU
    tensors with a d_state the kernel supports."""
    lib = _library()
    if lib is None or not scan_inputs:
        return lib is not None
    _, _, A, _, _ = scan_inputs
    return (
        all(t.device.type == "cpu" and t.dtype == torch.float32 for t in scan_inputs)
        and A.shape[-1] <= lib.rs_scan_max_state()
    )


def inference_available(hidden: torch.Tensor, d_state: int) -> bool:
    """True when the fused inference kernels can run a block on ``hidden``: built, fp32 CPU
    input, a supported d_state, and no autograd (they have no backward)."""
    lib = _library()
    return (
        lib is not None
        and not torch.is_grad_enabled()
        and hidden.device.type == "cpu"
        and hidden.dtype == torch.float32
        and d_state <= lib.rs_scan_max_state()
    )


def conv_silu(
    xz: torch.Tensor, mask: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
) -> torch.Tensor:
    """silu(causal depthwise conv(x * mask)) * mask of x = xz[..., :E]: xz (B, L, 2E), mask (B, L)
    float, weight (E, 1, K), bias (E,) -> (B, L, E). Inference only."""
    b, length, two_e = xz.shape
    e, k = weight.shape[0], weight.shape[-1]
    if two_e != 2 * e or mask.shape != (b, length) or bias.shape != (e,):
        raise ValueError(
            f"conv_silu: xz {tuple(xz.shape)}, mask {tuple(mask.shape)}, weight "
            f"{tuple(weight.shape)}"
        )
    u = xz.new_empty(b, length, e)
    wt, xz, mask = weight.reshape(e, k).t().contiguous(), xz.contiguous(), mask.contiguous()
    _library().rs_conv_silu(
        _p(xz),
        _p(mask),
        _p(wt),
        _p(bias.contiguous()),
        _p(u),
        b,
        length,
        e,
        k,
        torch.get_num_threads(),
    )
    return u


def gated_scan(
    u: torch.Tensor,
    dt: torch.Tensor,
    dt_bias: torch.Tensor,
    mask: torch.Tensor,
    A: torch.Tensor,
    dbc: torch.Tensor,
    dt_rank: int,
    Dv: torch.Tensor,
    xz: torch.Tensor,
) -> torch.Tensor:
    """(selective_scan(u, softplus(dt + dt_bias) * mask, A, B, C) + D u) * silu(z), with B and C
    read from the x_proj output dbc (B, L, R + 2N) and z = xz[..., E:]. (B, L, E). Inference
    only."""
    b, length, e = u.shape
    n, p = A.shape[1], dbc.shape[-1]
    if (
        dt.shape != u.shape
        or xz.shape != (b, length, 2 * e)
        or dbc.shape[:2] != (b, length)
        or p != dt_rank + 2 * n
        or mask.shape != (b, length)
        or A.shape[0] != e
        or dt_bias.shape != (e,)
        or Dv.shape != (e,)
    ):
        raise ValueError("gated_scan: inconsistent shapes (the kernel reads raw pointers)")
    out = torch.empty_like(u)
    args = [t.contiguous() for t in (u, dt, dt_bias, mask, A, dbc, Dv, xz)]
    _library().rs_gated_scan(
        *map(_p, args),
        _p(out),
        b,
        length,
        e,
        n,
        p,
        dt_rank,
        min(GROUPS, e),
        torch.get_num_threads(),
    )
    return out


def _p(t: torch.Tensor | None) -> ctypes.c_void_p | None:
    return None if t is None else ctypes.c_void_p(t.data_ptr())


class _CompiledScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, delta, A, Bm, Cm, Dv, chunk: int):
        lib = _library()
        b, length, e = x.shape
        n, groups = A.shape[1], min(GROUPS, e)
        n_chunks = -(-length // chunk)
        y = torch.empty_like(x)
        keep = any(ctx.needs_input_grad)
        starts = x.new_empty(b, n_chunks, e, n) if keep else None  # state before each chunk
        lib.rs_scan_forward(
            _p(x),
            _p(delta),
            _p(A),
            _p(Bm),
            _p(Cm),
            _p(y),
            _p(starts),
            b,
            length,
            e,
            n,
            chunk,
            groups,
            torch.get_num_threads(),
        )
        if keep:
            ctx.save_for_backward(x, delta, A, Bm, Cm, Dv, starts)
            ctx.sizes = (chunk, groups)
        return y + x * Dv

    @staticmethod
    def backward(ctx, dy):
        lib = _library()
        x, delta, A, Bm, Cm, Dv, starts = ctx.saved_tensors
        chunk, groups = ctx.sizes
        b, length, e = x.shape
        n = A.shape[1]
        dy = dy.contiguous()
        dx, ddelta = torch.empty_like(x), torch.empty_like(delta)
        dA_part = x.new_empty(b, e, n)  # per batch row
        dB_part, dC_part = (
            x.new_empty(groups, b, length, n),
            x.new_empty(groups, b, length, n),
        )  # per group
        lib.rs_scan_backward(
            _p(x),
            _p(delta),
            _p(A),
            _p(Bm),
            _p(Cm),
            _p(starts),
            _p(dy),
            _p(dx),
            _p(ddelta),
            _p(dA_part),
            _p(dB_part),
            _p(dC_part),
            b,
            length,
            e,
            n,
            chunk,
            groups,
            torch.get_num_threads(),
        )
        dx += dy * Dv
        return (
            dx,
            ddelta,
            dA_part.sum(0),
            dB_part.sum(0),
            dC_part.sum(0),
            (dy * x).sum(dim=(0, 1)),
            None,
        )


def selective_scan_compiled(x, delta, A, Bm, Cm, Dv, chunk: int = 64):
    """Same signature and result as ``mamba.selective_scan_ref``; needs ``available()``."""
    if not available(x, delta, A, Bm, Cm):
        raise RuntimeError(
            "the compiled selective scan is not available here (see scan_compiled.available)"
        )
    return _CompiledScan.apply(
        x.contiguous(),
        delta.contiguous(),
        A.contiguous(),
        Bm.contiguous(),
        Cm.contiguous(),
        Dv,
        chunk,
    )
