"""Scoring in chunks: a chunk holds fewer baskets where the vocabulary is large, and every
basket's figures do not depend on the chunk it was scored in."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st


def test_a_chunk_holds_fewer_baskets_where_the_vocabulary_is_large():
    from retailsim_core.next_basket.eval_config import EvalConfig

    cfg = EvalConfig()
    assert cfg.chunk_for(3_000) == cfg.chunk  # the synthetic default: as before
    assert cfg.chunk_for(61_445) == cfg.chunk_cells // 61_445 < cfg.chunk
    assert cfg.chunk_for(10**9) == 16  # never an empty chunk
    assert EvalConfig(chunk=8).chunk_for(61_445) == 8
    # A differentiated chunk holds its forward's graph: half the cells (D126).
    assert cfg.grad_chunk_for(3_000) == cfg.chunk
    assert cfg.grad_chunk_for(61_445) == cfg.chunk_for(61_445) // 2
    assert cfg.grad_chunk_for(10**9) == 16


def test_small_chunks_give_every_basket_the_figures_of_large_ones(tiny_warehouse, tiny_checkpoint):
    from retailsim_core.next_basket.eval_config import EvalConfig
    from retailsim_core.next_basket.scoring import score_rows
    from retailsim_core.pipeline.evaluation_run import load_tasks
    from retailsim_core.serving.scorer import world_model_scorer

    cfg = EvalConfig()
    tasks = load_tasks(tiny_warehouse["warehouse"], tiny_warehouse["split"], cfg, tiny_checkpoint)
    scorers = {"world_model": world_model_scorer(tasks.model)}
    rows = tasks.test_rows[:90]
    v = tasks.data.vocab.size

    def run(cells: int):
        small = dataclasses.replace(cfg, chunk_cells=cells)
        return score_rows(tasks.data, rows, scorers, {}, tasks.context, small, lambda _: None)

    large, small = run(1 << 23), run(20 * v)  # one chunk of 90, then chunks of 20
    np.testing.assert_array_equal(large.rows, small.rows)
    for metric, value in large.next_basket["world_model"].items():
        assert small.next_basket["world_model"][metric] == pytest.approx(
            value, abs=1e-9, nan_ok=True
        ), metric


def _dense_masked_ranks(position_scores, r, c, inputs, targets):
    """The oracle: every masked position's (V,) scores with the shown products and [EOS] set to
    -inf, compared in full."""
    import torch

    from retailsim_core.models.losses import shown_products

    shown = shown_products(
        torch.from_numpy(inputs), torch.from_numpy(targets), position_scores.shape[1]
    )
    s = position_scores.masked_fill(shown[torch.as_tensor(r)], -torch.inf)
    s[:, position_scores.shape[1] - 1] = -torch.inf
    true = s.gather(1, torch.as_tensor(targets[r, c].astype(np.int64))[:, None])
    return (s >= true).sum(1).numpy()


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    baskets=st.integers(1, 6),
    length=st.integers(1, 7),
    vocab=st.integers(5, 12),
    dtype=st.sampled_from(["float32", "float64"]),
)
def test_masked_ranks_equal_the_dense_oracle(seed, baskets, length, vocab, dtype):
    """Ties (scores on a coarse grid), -inf scores, a masked product also shown, [EOS] and the
    other specials scored: the ranks read at the shown products equal the full comparison."""
    import torch

    from retailsim_core.next_basket.scoring import masked_ranks

    rng = np.random.default_rng(seed)
    inputs = rng.integers(0, vocab, size=(baskets, length))  # PAD, products and specials
    targets = np.where(rng.random(inputs.shape) < 0.4, rng.integers(0, vocab, inputs.shape), 0)
    r, c = np.nonzero(targets != 0)
    scores = torch.from_numpy(rng.integers(-3, 4, size=(len(r), vocab)).astype(dtype))
    scores[torch.from_numpy(rng.random(scores.shape) < 0.15)] = -torch.inf
    got = masked_ranks(scores, r, c, inputs, targets)
    np.testing.assert_array_equal(got, _dense_masked_ranks(scores.clone(), r, c, inputs, targets))
    assert got.dtype == np.int64
    # A next-basket scorer's (B, V) rows, one per basket, read by every position of the basket.
    per_basket = torch.from_numpy(rng.integers(-3, 4, size=(baskets, vocab)).astype(dtype))
    per_basket[torch.from_numpy(rng.random(per_basket.shape) < 0.15)] = -torch.inf
    got = masked_ranks(per_basket, r, c, inputs, targets, basket_scores=True)
    want = _dense_masked_ranks(per_basket[torch.from_numpy(r)], r, c, inputs, targets)
    np.testing.assert_array_equal(got, want)
