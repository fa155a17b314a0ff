"""Mamba (S6) blocks in pure PyTorch, with the parameter layout of ``mamba_ssm``'s ``Mamba``.

Glossary of dimensions:
    B  batch, L  sequence length (history trips), D  d_model,
    E  d_inner = expand * D, N  d_state, R  dt_rank, K  d_conv (causal depthwise kernel)

Selective scan (per channel e and state n):
    delta_t = softplus(dt_proj(x_proj_dt(x_t)))             (B, L, E)
    h_t     = exp(delta_t * A) * h_{t-1} + delta_t * B_t * x_t   A = -exp(A_log)   (B, E, N)
    y_t     = <h_t, C_t> + D * x_t

``selective_scan_ref`` is the sequential fp32 oracle (autograd through every step).
``scan.selective_scan_fast`` computes the same with a hand-written backward that recomputes
states inside chunks (one fused kernel per step, O(L/T) stored states): linear in L and 4-20x
faster on CPU (docs/benchmarks.md); it matches the oracle to 1e-5 on outputs and gradients.
``scan_compiled.selective_scan_compiled`` is the same algorithm as a C kernel built on first use
(a feature check like mamba_ssm's: absent without a C compiler), faster again on CPU.
``scan="auto"`` uses the CUDA kernels of ``mamba_ssm`` when that package imports and the tensors
are on CUDA; on the CPU the compiled kernel when it is available, else the fast scan from
``auto_fast_min_len`` steps and the reference below it (short histories of wide batches: the
fast scan's (T, B, E, N) chunk tensors cost more memory traffic than the sequential steps).

Padding: sequences are right-padded; padded steps are given delta = 0 and x = 0, so they leave
the state untouched and a sequence's outputs do not depend on how much padding follows it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from retailsim_core.models.sequence import scan_compiled
from retailsim_core.models.sequence.scan import selective_scan_fast

try:  # optional CUDA fast path (the `cuda` extra); never required
    from mamba_ssm.ops.selective_scan_interface import selective_scan_fn as _cuda_selective_scan
except Exception:
    _cuda_selective_scan = None


@dataclass(frozen=True)
class MambaConfig:
    d_model: int = 512  # D (spec `paper`: 512)
    d_state: int = 64  # N (spec: state 64)
    d_conv: int = 4  # K (spec: conv kernel 4)
    expand: int = 2  # E = expand * D
    dt_min: float = 1e-3  # initial step sizes, log-uniform in [dt_min, dt_max]
    dt_max: float = 1e-1
    chunk: int = 64  # T of the fast scan's recomputation chunks
    auto_fast_min_len: int = 512  # "auto" on CPU: fast scan from this length, reference below
    use_cuda_kernels: bool = True

    @property
    def d_inner(self) -> int:
        return self.expand * self.d_model

    @property
    def dt_rank(self) -> int:
        return math.ceil(self.d_model / 16)


def selective_scan_ref(x, delta, A, Bm, Cm, Dv):
    """Sequential oracle. x, delta: (B, L, E); A: (E, N); Bm, Cm: (B, L, N); Dv: (E,). -> (B, L,
    E)
    """
    b, length, e = x.shape
    h = x.new_zeros(b, e, A.shape[1])  # (B, E, N)
    ys = []
    for t in range(length):
        dA = torch.exp(delta[:, t, :, None] * A)  # (B, E, N)
        dBx = delta[:, t, :, None] * Bm[:, t, None, :] * x[:, t, :, None]  # (B, E, N)
        h = dA * h + dBx
        ys.append((h * Cm[:, t, None, :]).sum(-1))  # (B, E)
    return torch.stack(ys, dim=1) + x * Dv  # (B, L, E)


class MambaBlock(nn.Module):
    """Pre-norm residual Mamba mixer: x + Mamba(LayerNorm(x)). (B, L, D) -> (B, L, D)."""

    def __init__(self, cfg: MambaConfig):
        super().__init__()
        self.cfg = cfg
        e, n, r = cfg.d_inner, cfg.d_state, cfg.dt_rank
        self.norm = nn.LayerNorm(cfg.d_model)
        self.in_proj = nn.Linear(cfg.d_model, 2 * e, bias=False)
        self.conv1d = nn.Conv1d(e, e, cfg.d_conv, groups=e, padding=cfg.d_conv - 1)
        self.x_proj = nn.Linear(e, r + 2 * n, bias=False)
        self.dt_proj = nn.Linear(r, e)
        dt = torch.exp(
            torch.rand(e) * (math.log(cfg.dt_max) - math.log(cfg.dt_min)) + math.log(cfg.dt_min)
        )
        with torch.no_grad():
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1(dt)
        self.A_log = nn.Parameter(
            torch.log(torch.arange(1, n + 1, dtype=torch.float32)).repeat(e, 1)
        )  # (E, N)
        self.D = nn.Parameter(torch.ones(e))
        self.out_proj = nn.Linear(e, cfg.d_model, bias=False)

    def forward(
        self, hidden: torch.Tensor, mask: torch.Tensor | None = None, scan: str = "auto"
    ) -> torch.Tensor:
        """``hidden`` (B, L, D); ``mask`` (B, L) True on real steps (right padding);
        ``scan``: "auto" | "reference" | "fast" | "compiled" | "cuda"."""
        cfg, length = self.cfg, hidden.shape[1]
        if scan in ("auto", "compiled") and scan_compiled.inference_available(hidden, cfg.d_state):
            return self._forward_fused(hidden, mask)
        xz = self.in_proj(self.norm(hidden))  # (B, L, 2E)
        x, z = xz.chunk(2, dim=-1)  # (B, L, E) each
        if mask is not None:
            x = x * mask[..., None]
        x = F.silu(
            self.conv1d(x.transpose(1, 2))[..., :length].transpose(1, 2)
        )  # causal conv, (B, L, E)
        dt, Bm, Cm = self.x_proj(x).split([cfg.dt_rank, cfg.d_state, cfg.d_state], dim=-1)
        delta = F.softplus(self.dt_proj(dt))  # (B, L, E)
        if mask is not None:  # padded steps: no decay, no input -> the state passes through
            delta, x = delta * mask[..., None], x * mask[..., None]
        A = -torch.exp(self.A_log.float())  # (E, N)
        y = self._scan(x, delta, A, Bm, Cm, scan)
        out = self.out_proj(y * F.silu(z))  # (B, L, D)
        if mask is not None:
            out = out * mask[..., None]
        return hidden + out

    def _forward_fused(self, hidden: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """The same block without autograd: the elementwise work runs in two compiled passes.
        x is masked before x_proj here (after it in ``forward``): that changes B_t and C_t only on
        padded steps, where delta = 0 and x = 0 leave the state and the masked output unchanged."""
        cfg = self.cfg
        m = (torch.ones(hidden.shape[:2]) if mask is None else mask).float()  # (B, L)
        xz = self.in_proj(self.norm(hidden))  # (B, L, 2E)
        u = scan_compiled.conv_silu(xz, m, self.conv1d.weight, self.conv1d.bias)  # (B, L, E)
        dbc = self.x_proj(u)  # (B, L, R + 2N)
        dt = F.linear(dbc[..., : cfg.dt_rank], self.dt_proj.weight)  # (B, L, E), bias in the kernel
        A = -torch.exp(self.A_log.float())  # (E, N)
        y = scan_compiled.gated_scan(u, dt, self.dt_proj.bias, m, A, dbc, cfg.dt_rank, self.D, xz)
        return hidden + self.out_proj(y) * m[..., None]  # (B, L, D)

    def _scan(self, x, delta, A, Bm, Cm, scan: str):
        if scan == "cuda" or (
            scan == "auto"
            and _cuda_selective_scan is not None
            and x.is_cuda
            and self.cfg.use_cuda_kernels
        ):
            if _cuda_selective_scan is None:
                raise RuntimeError(
                    "mamba-ssm is not installed (pip install '.[cuda]' on a CUDA machine)"
                )
            # mamba_ssm wants (B, E, L) inputs and B/C as (B, N, L); delta already softplus-ed.
            y = _cuda_selective_scan(
                x.transpose(1, 2).contiguous(),
                delta.transpose(1, 2).contiguous(),
                A,
                Bm.transpose(1, 2).contiguous(),
                Cm.transpose(1, 2).contiguous(),
                self.D.float(),
            )
            return y.transpose(1, 2)
        if scan == "compiled" or (scan == "auto" and scan_compiled.available(x, delta, A, Bm, Cm)):
            return scan_compiled.selective_scan_compiled(
                x, delta, A, Bm, Cm, self.D, chunk=self.cfg.chunk
            )
        if scan == "fast" or (scan == "auto" and x.shape[1] >= self.cfg.auto_fast_min_len):
            return selective_scan_fast(x, delta, A, Bm, Cm, self.D, chunk=self.cfg.chunk)
        return selective_scan_ref(x, delta, A, Bm, Cm, self.D)


def cuda_kernels_available() -> bool:
    return _cuda_selective_scan is not None and torch.cuda.is_available()
