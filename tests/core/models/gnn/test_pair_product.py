"""The compiled pair products against PyTorch's gathers, bit for bit (D104)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from retailsim_core.models.determinism import deterministic_kernels
from retailsim_core.models.gnn import pair_product as pp
from retailsim_core.models.gnn.graphsage import GraphSAGEConfig, NodeIds, model_graph, train

pytestmark = pytest.mark.skipif(
    not pp.available(torch.zeros(1, 1)), reason="no C compiler: the reference path runs"
)


def _bytes(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().numpy().tobytes()  # -0.0 and 0.0 differ, as in a file


def _reference(unit, src, dst):
    return pp.pair_product_reference(unit, src, dst).sum(-1)


def _product(unit, src, dst):
    return pp.pair_product(unit, src, dst).sum(-1)


FAST = [_product, pp.pair_dot]  # products summed by torch.sum; products and sums compiled


def _scores(dot, unit, pairs, weights):
    """A loss over several scores sharing ``unit``, as GraphSAGE's: the backward adds every
    score's two gradients into one tensor, in an order the engine decides."""
    leaf = unit.clone().requires_grad_()
    z = torch.nn.functional.normalize(leaf, dim=-1)
    outs = [dot(z, s, d) / 0.2 for s, d in pairs]
    sum((o * w).sum() for o, w in zip(outs, weights, strict=True)).backward()
    return [_bytes(o) for o in outs], _bytes(leaf.grad)


def _case(seed: int, n: int, e: int, h: int):
    gen = torch.Generator().manual_seed(seed)
    unit = torch.randn(n, h, generator=gen)
    src = torch.randint(0, n, (e,), generator=gen)
    pairs = [
        (src, torch.randint(0, n, (e,), generator=gen)),  # positives
        (src.repeat(3), torch.randint(0, n, (3 * e,), generator=gen)),  # negatives
        (torch.randint(0, n, (e,), generator=gen), src),
    ]
    weights = [torch.randn(len(s), generator=gen) for s, _ in pairs]
    return unit, pairs, weights


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_forward_and_backward_equal_the_gathers_bit_for_bit(threads, fast):
    unit, pairs, weights = _case(0, 40, 3_000, 256)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with deterministic_kernels():
            assert _scores(fast, unit, pairs, weights) == _scores(_reference, unit, pairs, weights)
    finally:
        torch.set_num_threads(before)


def test_the_row_sum_is_compiled_for_graphsage_width():
    """GraphSAGE's width (256) has a known sum order on this machine (else the products are
    summed by torch.sum, the same bytes, slower); widths whose order the kernel does not
    follow are found out and refused."""
    assert pp.sum_lanes(256) is not None
    assert pp.sum_lanes(1_000) is None  # PyTorch cascades its accumulators past 64 vectors


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(1, 30),
    e=st.integers(0, 300),
    h=st.sampled_from([1, 7, 32, 33, 100]),
)
def test_any_shape_equals_the_gathers(seed, n, e, h):
    unit, pairs, weights = _case(seed, n, e, h)
    with deterministic_kernels():
        want = _scores(_reference, unit, pairs, weights)
        assert all(_scores(fast, unit, pairs, weights) == want for fast in FAST)


def test_swapped_gradients_would_differ():
    """The test above can fail: handing autograd the two gradients in the other order (the
    source's first) changes the sums' order and the bytes."""

    class Swapped(pp._PairProduct):
        @staticmethod
        def backward(ctx, grad):
            g_dst, g_src, *_ = pp._PairProduct.backward(ctx, grad)
            return g_src, g_dst, None, None

    def swapped(unit, src, dst):
        return Swapped.apply(unit, unit, src, dst).sum(-1)

    unit, pairs, weights = _case(0, 40, 3_000, 256)
    with deterministic_kernels():
        assert _scores(swapped, unit, pairs, weights) != _scores(_reference, unit, pairs, weights)


def test_another_sum_order_would_differ():
    """The row sum's order is checked, not assumed: sixteen lanes (AVX-512's float width) add
    GraphSAGE's rows in another order than this machine's torch.sum."""
    unit, pairs, _ = _case(0, 40, 3_000, 256)
    src, dst = pp._checked(unit, *pairs[0])
    lanes = pp.sum_lanes(256)
    other = 16 if lanes == 8 else 8
    want = _reference(unit, src, dst).numpy().tobytes()
    assert pp._dot(unit, src, dst, lanes).numpy().tobytes() == want
    assert pp._dot(unit, src, dst, other).numpy().tobytes() != want


def test_graphsage_trains_to_the_same_bytes(monkeypatch):
    gen = torch.Generator().manual_seed(1)
    n = 60
    ids = NodeIds(
        sku=torch.arange(1, n + 1),
        brand=torch.randint(0, 5, (n,), generator=gen),
        category=torch.randint(0, 4, (n,), generator=gen),
        tier=torch.randint(0, 4, (n,), generator=gen),
    )
    edges = {
        rel: (
            torch.randint(0, n, (m,), generator=gen),
            torch.randint(0, n, (m,), generator=gen),
            torch.rand(m, generator=gen) + 0.5,
        )
        for rel, m in (("copurchase", 300), ("substitution", 40), ("hierarchy", 60))
    }
    graphs, cfg = model_graph(edges, n), GraphSAGEConfig(epochs=4)

    def trained():
        model, losses = train(graphs, ids, edges, (n, 5, 4), cfg)
        return [_bytes(p) for p in model.parameters()], losses

    fast = trained()
    monkeypatch.setattr(pp, "available", lambda unit: False)
    assert trained() == fast


@pytest.mark.parametrize("fast", [pp.pair_product, pp.pair_dot])
def test_out_of_range_pairs_are_refused(fast):
    unit = torch.randn(5, 8)
    with pytest.raises(IndexError):
        fast(unit, torch.tensor([0, 5]), torch.tensor([1, 2]))
    with pytest.raises(IndexError):
        fast(unit, torch.tensor([0, 1]), torch.tensor([-1, 2]))


def test_other_dtypes_take_the_reference():
    unit = torch.randn(5, 8, dtype=torch.float64)
    src, dst = torch.tensor([0, 4, 4]), torch.tensor([1, 1, 3])
    assert not pp.available(unit)
    assert torch.equal(pp.pair_product(unit, src, dst), unit[src] * unit[dst])
    assert torch.equal(pp.pair_dot(unit, src, dst), (unit[src] * unit[dst]).sum(-1))
