"""Benchmark: Mamba encoder forward+backward vs a Transformer encoder of the same width and depth,
and the scans against each other, on CPU with one thread (the issue's reference setting).

Encoders: ``MambaBlock`` stacks with the compiled C scan (``models/sequence/scan_compiled.py``,
when a C compiler is present), the fast PyTorch scan (``models/sequence/scan.py``), the sequential
reference scan, and a Hillis-Steele parallel scan over the whole sequence (the pure-PyTorch
"parallel pscan" family of mambapy, reimplemented here because mambapy is not installable in
this workplace); PyTorch's ``nn.TransformerEncoder`` (pre-norm, GELU, 4x FFN, ``d_model // 64``
heads, at least 2).
Reference figures for mambapy's own pscan measured on this machine are in the issue and in
docs/benchmarks.md.

    python benchmarks/bench_mamba.py                       # d_model 64, 2 layers, batch 4
    python benchmarks/bench_mamba.py --paper               # d_model 512, 4 layers, batch 1
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn as nn

from retailsim_core.models.sequence import mamba, scan_compiled
from retailsim_core.models.sequence.mamba import MambaBlock, MambaConfig


def _prefix_scan(a: torch.Tensor, b: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inclusive Hillis-Steele scan of h_t = a_t h_{t-1} + b_t along ``dim``: log2(L) passes."""
    t, shift = a.shape[dim], 1
    while shift < t:
        a_prev, b_prev = a.narrow(dim, 0, t - shift), b.narrow(dim, 0, t - shift)
        a_cur, b_cur = a.narrow(dim, shift, t - shift), b.narrow(dim, shift, t - shift)
        b = torch.cat([b.narrow(dim, 0, shift), b_cur + a_cur * b_prev], dim=dim)
        a = torch.cat([a.narrow(dim, 0, shift), a_cur * a_prev], dim=dim)
        shift *= 2
    return a, b


def whole_sequence_pscan(x, delta, A, Bm, Cm, Dv):
    """One parallel scan over all L steps (O(L log L) work), like mambapy's pscan family."""
    decay = torch.exp(delta[..., None] * A)  # (B, L, E, N)
    dBx = delta[..., None] * Bm[:, :, None, :] * x[..., None]
    _, h = _prefix_scan(decay, dBx, dim=1)
    return torch.einsum("blen,bln->ble", h, Cm) + x * Dv


class MambaEncoder(nn.Module):
    def __init__(self, d: int, layers: int, d_state: int, scan: str):
        super().__init__()
        cfg = MambaConfig(d_model=d, d_state=d_state)
        self.blocks, self.scan = nn.ModuleList(MambaBlock(cfg) for _ in range(layers)), scan

    def forward(self, x):
        for block in self.blocks:
            x = block(x, scan=self.scan)
        return x


def transformer(d: int, layers: int) -> nn.Module:
    layer = nn.TransformerEncoderLayer(
        d, max(d // 64, 2), 4 * d, 0.0, activation="gelu", batch_first=True, norm_first=True
    )
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


def time_fwd_bwd(model: nn.Module, x: torch.Tensor, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        xi = x.clone().requires_grad_(True)
        start = time.perf_counter()
        model(xi).square().mean().backward()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--paper", action="store_true", help="the spec's width: d_model 512, 4 layers, state 64"
    )
    ap.add_argument("--lengths", type=int, nargs="*", default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--budget-ms",
        type=float,
        default=30_000,
        help="skip longer lengths once a method exceeds this",
    )
    ap.add_argument("--record", metavar="AREA", help="write benchmarks/results/AREA.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    d, layers, d_state, batch = (512, 4, 64, 1) if args.paper else (64, 2, 16, 4)
    lengths = args.lengths or (
        [64, 256, 1024, 2048, 4096] if args.paper else [64, 128, 256, 512, 1024, 2048, 4096, 8192]
    )
    torch.manual_seed(0)
    methods = {
        "mamba_compiled": MambaEncoder(d, layers, d_state, "compiled"),
        "mamba_fast": MambaEncoder(d, layers, d_state, "fast"),
        "mamba_reference": MambaEncoder(d, layers, d_state, "reference"),
        "transformer": transformer(d, layers),
    }
    if not scan_compiled.available():
        del methods["mamba_compiled"]
        print("compiled scan unavailable (no C compiler?): column skipped")
    if not args.paper:
        pscan = MambaEncoder(d, layers, d_state, "reference")
        methods["mamba_whole_pscan"] = pscan
    slow: set[str] = set()
    rows = []
    for length in lengths:
        x = torch.randn(batch, length, d)
        row = {"L": length}
        for name, model in methods.items():
            if name in slow:
                row[name] = None
                continue
            original = mamba.selective_scan_ref
            if name == "mamba_whole_pscan":
                mamba.selective_scan_ref = whole_sequence_pscan  # same block, other scan
            try:
                ms = time_fwd_bwd(model, x, repeats=2 if length <= 1024 else 1)
            except RuntimeError as err:  # out of memory at the longest lengths
                ms, slow = None, slow | {name}
                print(f"{name} L={length}: {err}".splitlines()[0])
            finally:
                mamba.selective_scan_ref = original
            row[name] = None if ms is None else round(ms, 1)
            if ms is not None and ms > args.budget_ms:
                slow.add(name)
        print(json.dumps(row), flush=True)
        rows.append(row)
    crossover = {
        name: next(
            (
                r["L"]
                for r in rows
                if r.get(name) and r.get("transformer") and r[name] < r["transformer"]
            ),
            None,
        )
        for name in methods
        if name.startswith("mamba")
    }
    print(
        json.dumps(
            {
                "setting": {
                    "d_model": d,
                    "layers": layers,
                    "d_state": d_state,
                    "batch": batch,
                    "threads": args.threads,
                },
                "first_L_where_mamba_beats_attention": crossover,
            }
        )
    )
    if args.record:
        from benchmarks.results import record, table

        names = list(methods)
        record(
            args.record,
            title=f"Mamba encoder vs attention, d {d}, {layers} layers",
            command=f"python -m benchmarks.bench_mamba{' --paper' if args.paper else ''} "
            f"--record {args.record}",
            tables={
                "ms": table(
                    ["L"] + [f"{n} ms" for n in names],
                    [[r["L"]] + [r.get(n) for n in names] for r in rows],
                    {f"{n} ms": ",.0f" for n in names},
                )
            },
        )


if __name__ == "__main__":
    main()
