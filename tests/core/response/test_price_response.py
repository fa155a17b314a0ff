"""The price checks on the tiny warehouse: the simulation check in chunks (the real baskets'
figures do not depend on the chunking, one chunk of every context draws what an unchunked check
draws), contexts built a chunk at a time, and the expected-size check (D131)."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def tasks(tiny_warehouse, tiny_checkpoint):
    from retailsim_core.next_basket.eval_config import EvalConfig
    from retailsim_core.pipeline.evaluation_run import load_tasks

    wh, split = tiny_warehouse["warehouse"], tiny_warehouse["split"]
    return load_tasks(wh, split, EvalConfig(), tiny_checkpoint)


def _priced(tasks, warehouse, n: int):
    """The first ``n`` test rows, their stores and weeks, and those store-weeks' price features."""
    from retailsim_core.pipeline.readers.price_reader import read_price_features

    rows = tasks.test_rows[:n]
    samples = tasks.samples[rows]
    stores, weeks = samples["store_id"].to_list(), samples["week"].to_list()
    prices = read_price_features(warehouse, sorted(set(weeks)), stores=sorted(set(stores)))
    return rows, stores, weeks, prices


def test_the_simulation_check_in_chunks_keeps_the_real_figures(tiny_warehouse, tasks):
    from retailsim_core.response.price_response import simulation_check

    rows, stores, weeks, prices = _priced(tasks, tiny_warehouse["warehouse"], 40)

    def check(chunk):
        return simulation_check(tasks.model, tasks.data, rows, prices, stores, weeks, 3, chunk)

    whole, one, parts = check(None), check(len(rows)), check(7)
    assert one == whole  # one chunk draws as the unchunked check
    real = ("baskets", "real_mean_size", "real_repeat_share")
    assert {k: parts["summary"][k] for k in real} == {k: whole["summary"][k] for k in real}
    assert parts["sizes"]["real"] == whole["sizes"]["real"]
    assert sum(parts["sizes"]["simulated"]) == len(rows)
    assert 0 < parts["summary"]["simulated_mean_size"] and np.isfinite(
        parts["summary"]["size_total_variation"]
    )


def test_contexts_built_a_chunk_at_a_time_give_the_whole_batchs_response(tasks):
    """D127: the elasticity contexts' batch is built a chunk at a time (each chunk its own
    padding), never all at once; sizes, units and Jacobian rows are the whole batch's."""
    from retailsim_core.counterfactual.simulate import jacobian_rows, sizes_and_units
    from retailsim_core.response.price_response import rows_of

    rows = tasks.test_rows[:30]
    built = []

    def contexts(start, stop):
        built.append(stop - start)
        return rows_of(tasks.data, rows)(start, stop)

    whole_size, whole_units = sizes_and_units(tasks.model, tasks.data[rows], len(rows))
    size, units = sizes_and_units(tasks.model, contexts, len(rows), 7)
    assert max(built) == 7 and sum(built) == len(rows)  # never more than a chunk's rows
    np.testing.assert_allclose(size.numpy(), whole_size.numpy(), rtol=1e-5)
    np.testing.assert_allclose(units.numpy(), whole_units.numpy(), rtol=1e-4, atol=1e-7)
    products = np.argsort(-whole_units.numpy()[1:-2])[:3] + 1
    whole = jacobian_rows(tasks.model, tasks.data[rows], whole_size, products)
    parts = jacobian_rows(tasks.model, contexts, size, products, 7)
    np.testing.assert_allclose(parts, whole, rtol=1e-3, atol=1e-6)
    assert np.abs(whole).max() > 0  # a real response is compared, not zeros


def test_the_expected_size_check_is_the_size_heads_mean_over_every_context(tasks):
    """D131: the size head's expected size over the contexts (in chunks or not) against the
    real sizes of their baskets, with a resample interval around the ratio."""
    from retailsim_core.counterfactual.simulate import expected_basket_size
    from retailsim_core.response.price_response import expected_size_check

    rows = tasks.test_rows[:50]
    whole = expected_size_check(tasks.model, tasks.data, rows, seed=1)
    parts = expected_size_check(tasks.model, tasks.data, rows, seed=1, chunk=9)
    head = expected_basket_size(tasks.model, tasks.data[rows]).double().numpy()
    real = tasks.data.item_counts[rows] + tasks.data.item_oov[rows]
    assert whole["expected_contexts"] == 50
    np.testing.assert_allclose(whole["expected_mean_size"], head.mean(), rtol=1e-6)
    np.testing.assert_allclose(parts["expected_mean_size"], head.mean(), rtol=1e-5)
    assert whole["expected_real_mean_size"] == real.mean()
    low, high = whole["expected_size_ratio_interval"]
    assert low < whole["expected_size_ratio"] < high


def test_a_simulated_basket_holds_the_size_drawn_from_the_head(tiny_warehouse, tasks):
    """What lets the expected size stand for the simulated mean size (D131): the simulation
    fills exactly the drawn number of slots, so its mean size is the mean of draws from the
    size head."""
    import torch

    from retailsim_core.counterfactual import simulate

    rows, stores, weeks, prices = _priced(tasks, tiny_warehouse["warehouse"], 30)
    batch = tasks.data[rows]
    book = simulate.price_book(prices, stores, weeks, tasks.data.vocab)
    probs = simulate.size_distribution(tasks.model, batch)
    drawn = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(5))[:, 0] + 1
    baskets = simulate.generate(tasks.model, batch, book, seed=5)
    assert [len(b) for b in baskets] == drawn.tolist()
