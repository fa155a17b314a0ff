"""The compiled CPU selective scan: oracle tests against the sequential reference, thread-count
determinism, padding, and the fallback when it cannot be built."""

import shutil

import pytest
import torch

from retailsim_core.models.sequence import scan_compiled
from retailsim_core.models.sequence.mamba import MambaBlock, MambaConfig, selective_scan_ref

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on this machine")


def _inputs(b, length, e, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, length, e, generator=g)
    delta = torch.nn.functional.softplus(torch.randn(b, length, e, generator=g))
    A = -torch.exp(torch.randn(e, n, generator=g))
    Bm, Cm = torch.randn(b, length, n, generator=g), torch.randn(b, length, n, generator=g)
    return x, delta, A, Bm, Cm, torch.randn(e, generator=g)


def _value_and_grads(fn, inputs, **kw):
    args = [t.detach().clone().requires_grad_(True) for t in inputs]
    y = fn(*args, **kw)
    y.square().sum().backward()
    return y.detach(), [a.grad for a in args]


def test_the_kernel_builds_where_a_compiler_exists():
    assert scan_compiled.available(*_inputs(1, 2, 3, 4)[:5])


def _close_at_scale(got, want, tol=1e-5):
    """|got - want| <= tol * max|want| (+ tol): fp32 error relative to the tensor's scale."""
    err, scale = (got.double() - want).abs().max().item(), want.abs().max().item()
    assert err <= tol * scale + tol, f"error {err:.3g} at scale {scale:.3g}"


# The fp32 scans (reference, PyTorch fast, compiled) all differ from the fp64 oracle by fp32
# rounding, ~1e-7 of a gradient's scale; gradients here reach ~1,000, so elementwise 1e-5
# against another fp32 scan would test summation order, not correctness. Shapes cover channel
# blocks (16) and groups (8) that do not divide E, N not a vector width and a single step.
@pytest.mark.parametrize(
    "shape,chunk",
    [
        ((2, 37, 12, 5), 1),
        ((2, 37, 12, 5), 4),
        ((2, 37, 12, 5), 16),
        ((2, 37, 12, 5), 64),
        ((3, 70, 20, 16), 64),
        ((1, 1, 3, 2), 64),
        ((2, 33, 70, 17), 16),
    ],
)
def test_matches_the_fp64_oracle_outputs_and_gradients(shape, chunk):
    inputs = _inputs(*shape)
    y64, g64 = _value_and_grads(selective_scan_ref, [t.double() for t in inputs])
    y, grads = _value_and_grads(scan_compiled.selective_scan_compiled, inputs, chunk=chunk)
    torch.testing.assert_close(
        y, selective_scan_ref(*inputs), atol=1e-5, rtol=1e-5
    )  # outputs: fp32 reference
    _close_at_scale(y, y64)
    for got, want in zip(grads, g64, strict=True):
        _close_at_scale(got, want)


def test_inference_without_grad_gives_the_same_outputs():
    inputs = _inputs(3, 40, 24, 8)
    with torch.no_grad():
        y_no_grad = scan_compiled.selective_scan_compiled(*inputs, chunk=16)
    y, _ = _value_and_grads(scan_compiled.selective_scan_compiled, inputs, chunk=16)
    assert torch.equal(y_no_grad, y)


def test_results_are_bitwise_the_same_for_any_thread_count():
    inputs = _inputs(3, 45, 40, 16, seed=3)
    before = torch.get_num_threads()
    runs = []
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            runs.append(_value_and_grads(scan_compiled.selective_scan_compiled, inputs, chunk=8))
    finally:
        torch.set_num_threads(before)
    for y, grads in runs[1:]:
        assert torch.equal(y, runs[0][0])
        assert all(torch.equal(a, b) for a, b in zip(grads, runs[0][1], strict=True))


def test_strong_decay_underflows_instead_of_overflowing():
    x, delta, A, Bm, Cm, Dv = _inputs(2, 37, 12, 5)
    delta, A = delta * 0 + 5.0, A * 0 - 64.0
    y = scan_compiled.selective_scan_compiled(x, delta, A, Bm, Cm, Dv, chunk=8)
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y, selective_scan_ref(x, delta, A, Bm, Cm, Dv), atol=1e-5, rtol=1e-5)


def test_block_padding_does_not_leak_and_auto_uses_the_kernel():
    torch.manual_seed(0)
    block = MambaBlock(MambaConfig(d_model=16, d_state=8, chunk=8))
    seq = torch.randn(1, 13, 16)
    alone = block(seq, torch.ones(1, 13, dtype=torch.bool), scan="reference")
    batch = torch.cat(
        [torch.cat([seq, 100 * torch.randn(1, 17, 16)], dim=1), torch.randn(1, 30, 16)]
    )
    mask = torch.ones(2, 30, dtype=torch.bool)
    mask[0, 13:] = False
    out = block(batch, mask, scan="compiled")
    torch.testing.assert_close(out[0, :13], alone[0], atol=1e-5, rtol=1e-5)
    assert torch.equal(block(batch, mask, scan="auto"), out)


def _perturbed_block(d_model, d_state, seed=0):
    torch.manual_seed(seed)
    block = MambaBlock(MambaConfig(d_model=d_model, d_state=d_state))
    with torch.no_grad():  # non-zero conv bias, skip D and dt bias away from their initial values
        for p in block.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return block


def test_fused_inference_block_matches_the_pytorch_block(monkeypatch):
    block = _perturbed_block(d_model=20, d_state=5)  # E = 40: a partial channel block
    x = torch.randn(4, 23, 20)
    mask = (
        torch.arange(23)[None] < torch.tensor([23, 9, 0, 1])[:, None]
    )  # padding and an empty history
    calls = []
    fused = scan_compiled.gated_scan
    monkeypatch.setattr(scan_compiled, "gated_scan", lambda *a: calls.append(1) or fused(*a))
    with torch.no_grad():
        for m in (mask, None):
            torch.testing.assert_close(
                block(x, m, scan="auto"), block(x, m, scan="reference"), atol=1e-5, rtol=1e-5
            )
    assert len(calls) == 2
    block(x, mask, scan="auto")  # with autograd: the unfused path
    assert len(calls) == 2


def test_fused_inference_kernels_are_bitwise_the_same_for_any_thread_count():
    # The kernels themselves (the block's matmuls are PyTorch's, outside this guarantee).
    g = torch.Generator().manual_seed(1)
    b, length, e, n, r = 5, 31, 40, 16, 3
    xz, dt, dbc = (
        torch.randn(b, length, 2 * e, generator=g),
        torch.randn(b, length, e, generator=g),
        torch.randn(b, length, r + 2 * n, generator=g),
    )
    mask = (torch.arange(length)[None] < torch.tensor([31, 4, 17, 30, 1])[:, None]).float()
    weight, bias, dt_bias, Dv = (
        torch.randn(e, 1, 4, generator=g),
        torch.randn(e, generator=g),
        torch.randn(e, generator=g),
        torch.randn(e, generator=g),
    )
    A = -torch.exp(torch.randn(e, n, generator=g))
    before = torch.get_num_threads()
    runs = []
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            u = scan_compiled.conv_silu(xz, mask, weight, bias)
            runs.append((u, scan_compiled.gated_scan(u, dt, dt_bias, mask, A, dbc, r, Dv, xz)))
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(u, runs[0][0]) and torch.equal(y, runs[0][1]) for u, y in runs[1:])


def test_fused_kernels_refuse_inconsistent_shapes():
    with pytest.raises(ValueError, match="conv_silu"):  # xz must hold 2E channels
        scan_compiled.conv_silu(
            torch.randn(2, 5, 10), torch.ones(2, 5), torch.randn(4, 1, 4), torch.randn(4)
        )
    u, A = torch.randn(2, 5, 4), -torch.ones(4, 3)
    with pytest.raises(ValueError, match="gated_scan"):  # dbc: dt_rank + 2N = 8 columns, not 7
        scan_compiled.gated_scan(
            u,
            u,
            torch.randn(4),
            torch.ones(2, 5),
            A,
            torch.randn(2, 5, 7),
            2,
            torch.randn(4),
            torch.randn(2, 5, 8),
        )


def test_falls_back_to_pytorch_when_disabled(monkeypatch):
    block = MambaBlock(MambaConfig(d_model=8, d_state=4))
    x = torch.randn(2, 9, 8)
    try:
        monkeypatch.setenv("RETAILSIM_COMPILED_SCAN", "0")
        scan_compiled._library.cache_clear()
        assert not scan_compiled.available()
        assert torch.equal(block(x, scan="auto"), block(x, scan="reference"))
        with torch.no_grad():
            assert torch.equal(block(x, scan="auto"), block(x, scan="reference"))
        with pytest.raises(RuntimeError, match="not available"):
            block(x, scan="compiled")
    finally:
        monkeypatch.undo()
        scan_compiled._library.cache_clear()
    assert scan_compiled.available()


def test_only_fp32_cpu_tensors_and_supported_states_use_the_kernel():
    inputs = _inputs(1, 4, 3, 2)[:5]
    assert scan_compiled.available(*inputs)
    assert not scan_compiled.available(*(t.double() for t in inputs))
    x, delta, _, Bm, Cm = _inputs(1, 4, 3, 257)[:5]  # d_state above 256
    assert not scan_compiled.available(x, delta, -torch.ones(3, 257), Bm, Cm)
