"""Scoring in chunks: a chunk holds fewer baskets where the vocabulary is large, and every
basket's figures do not depend on the chunk it was scored in."""

import dataclasses

import numpy as np
import pytest


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
