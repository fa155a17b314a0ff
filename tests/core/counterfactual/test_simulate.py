"""Basket generation, expected units, autograd elasticities and shelf prices (the pricing
environment: tests/core/pricing)."""

import copy

import numpy as np
import polars as pl
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from retailsim_core.counterfactual.simulate import (
    elasticities,
    expected_basket_size,
    expected_units,
    generate,
    held,
    jacobian_rows,
    price_book,
    sizes_and_units,
)
from retailsim_core.datasets.shelf import SHELF_FEATURES, ShelfPrices, with_price_multipliers
from retailsim_core.datasets.tokens import ProductVocab
from retailsim_core.models.heads.products import CONTEXT_SHELF_FEATURES
from retailsim_core.pipeline.readers.warehouse_inputs import load_model_inputs
from retailsim_core.training.checkpoints.checkpoint import load_model


@pytest.fixture(scope="module")
def world(tiny_checkpoint, tiny_warehouse):
    model, vocab, _ = load_model(tiny_checkpoint)
    inputs = load_model_inputs(tiny_warehouse["warehouse"])
    test = inputs.samples.filter(pl.col("split") == "test").head(12)
    data = inputs.training_set(test)
    batch = data[list(range(len(data)))]
    trips = inputs.store.trips.filter(pl.col("basket_id").is_in(test["basket_id"].implode()))
    ctx = test.select("basket_id").join(
        trips.select("basket_id", "store_id", "week"), on="basket_id", maintain_order="left"
    )
    book = price_book(
        inputs.price_features, ctx["store_id"].to_list(), ctx["week"].to_list(), vocab
    )
    return model, vocab, batch, book, inputs


def test_generation_is_seeded_and_well_formed(world):
    model, vocab, batch, book, _ = world
    a = generate(model, batch, book, seed=7)
    assert a == generate(model, batch, book, seed=7)
    assert a != generate(model, batch, book, seed=8)
    for basket in a:
        assert 1 <= len(basket) <= 50 and len(set(basket)) == len(basket)
        assert all(1 <= t <= vocab.n_products for t in basket)  # never PAD, MASK or EOS
    sizes = torch.tensor([1, 3, 2] * 4)
    fixed = generate(model, batch, book, seed=7, sizes=sizes)
    assert [len(b) for b in fixed] == sizes.tolist()  # a given size is kept exactly


def test_sizes_are_drawn_from_the_size_head(world, monkeypatch):
    """D53: a basket's size comes from the size head's distribution, not from an [EOS] draw."""
    model, vocab, batch, book, _ = world
    from retailsim_core.counterfactual import simulate as simulation

    n = len(batch["basket_labels"])
    probs = torch.zeros(n, model.cfg.max_items, dtype=torch.float64)
    probs[: n // 2, 3] = 1.0  # first half: 4 products
    probs[n // 2 :, 0] = 1.0  # second half: 1 product
    monkeypatch.setattr(simulation, "size_distribution", lambda *a, **k: probs)
    assert [len(b) for b in generate(model, batch, book, seed=3)] == [4] * (n // 2) + [1] * (
        n - n // 2
    )


def test_counterfactual_prices_change_the_simulation(world):
    model, vocab, batch, book, _ = world
    base = generate(model, batch, book, seed=1)
    sale = generate(
        model, batch, book, seed=1, log_multiplier=torch.full((vocab.size,), float(np.log(0.3)))
    )
    assert base != sale  # a 70% sale on everything: product-level responses
    from retailsim_core.counterfactual.simulate import first_slot_distribution

    # A product's own price cut helps it wherever it is on the shelf through its own-depth
    # response, which is never negative (D45). A context's weight on the price level has a
    # free sign (a tier preference) that can outweigh it, so the mechanism is checked with
    # that weight at zero.
    model = copy.deepcopy(model)
    level = CONTEXT_SHELF_FEATURES.index("log_relative_price")
    with torch.no_grad():
        model.price_response.context_weights.weight[level] = 0.0
        model.price_response.context_weights.bias[level] = 0.0
    available = batch["shelf"][..., 3] > 0  # (B, V)
    own = model.price_response.product_weights[:, 0].detach()
    product = int(torch.where(available.any(0), own, -1.0).argmax())
    cut = torch.zeros(vocab.size)
    cut[product] = float(np.log(0.5))
    with torch.no_grad():
        before, after = (
            first_slot_distribution(model, batch),
            first_slot_distribution(model, batch, cut),
        )
    rows = available[:, product]
    assert rows.any() and (after[rows, product] > before[rows, product]).all()


def test_autograd_elasticities_match_finite_differences(world):
    model, vocab, batch, _, _ = world
    size = torch.full((len(batch["basket_labels"]),), 5.0)
    units = expected_units(model, batch, size)
    products = torch.topk(units[1 : vocab.n_products + 1], 4).indices.numpy() + 1
    table = elasticities(
        model, batch, size, products, categories=np.zeros(vocab.size, dtype=np.int64), top_k=2
    )
    # At the regular price the discount depth has a kink (a rise adds no negative depth): autograd
    # gives the derivative of a price cut, so the oracle is the one-sided difference downwards.
    eps = 1e-3
    for i in products[:2]:
        down = torch.zeros(vocab.size, dtype=torch.float64)
        down[i] = -eps
        with torch.no_grad():
            fd = (
                torch.log(units[i].double())
                - torch.log(expected_units(model, batch, size, down.float())[i].double())
            ) / eps
        own = table.filter((pl.col("product") == i) & (pl.col("kind") == "own"))["elasticity"][0]
        assert own == pytest.approx(float(fd), abs=2e-3)
    assert (
        set(table["kind"]) <= {"own", "same_category", "top_cross"}
        and table.filter(pl.col("kind") == "own").height == 4
    )


def _shelf_inputs(own_depth: float):
    pf = pl.DataFrame(
        {
            "store_id": ["S1", "S1", "S1", "S2"],
            "week": [4, 4, 5, 4],
            "product_id": ["P1", "P2", "P1", "P1"],
            "relative_price": [0.8, 2.0, 9.0, 1.0],
            "discount_depth": [0.2, 0.0, 0.5, 0.0],
            "promo_flag": [True, False, True, False],
        }
    )
    observed = pl.DataFrame(
        {
            "product_id": ["P1", "P1", "P1", "P2"],
            "store_id": ["S1", "S2", "S3", "S3"],
            "store_region": ["R1", "R1", "R2", "R2"],
            "week": [5, 5, 5, 5],
            "discount_depth": [own_depth, 0.3, 0.1, 0.4],
        }
    )
    return (
        pf,
        observed,
        pl.DataFrame({"store_id": ["S1", "S2", "S3"], "store_region": ["R1", "R1", "R2"]}),
    )


def test_shelf_of_week_w_is_last_weeks_regular_price_with_the_regions_promotions_of_week_w():
    vocab = ProductVocab(("P1", "P2"))
    pf, observed, regions = _shelf_inputs(own_depth=0.5)
    shelf = ShelfPrices.build(pf, observed, regions, vocab)
    rows = shelf.rows_of(pl.Series(["S1", "S1", "S3"]), pl.Series([5, 6, 5]))
    dense = shelf.dense(rows)
    # S1, week 5: P1's regular position is week 4's 0.8 / (1 - 0.2) = 1.0; this week's depth is
    # S2's 0.3 (same region), never S1's own 0.5 nor S3's (another region).
    np.testing.assert_allclose(dense[0, 1], [np.log(0.7), 0.3, 1.0, 1.0, 0.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(
        dense[0, 2], [np.log(2.0), 0.0, 0.0, 1.0, 0.0, 0.0], atol=1e-6
    )  # no other store sold P2
    np.testing.assert_allclose(
        dense[1, 1], [np.log(9.0 / 0.5), 0.0, 0.0, 1.0, 0.0, 0.0], atol=1e-6
    )  # week 6: no week-6 sales
    assert rows[2] == -1 and not dense[2].any()  # S3 had no week-4 prices
    np.testing.assert_array_equal(shelf.dense(rows[:2]), dense[:2])  # all rows known: the fast path
    assert shelf.dense(np.zeros(0, dtype=np.int64)).shape == (0, vocab.size, len(SHELF_FEATURES))
    # No leakage: what the basket's own store sold in week W never changes its shelf.
    for own in (0.0, 0.1, 0.69):
        other = ShelfPrices.build(*_shelf_inputs(own_depth=own), vocab)
        np.testing.assert_array_equal(
            other.dense(other.rows_of(pl.Series(["S1"]), pl.Series([5]))), dense[:1]
        )
    no_own_row = ShelfPrices.build(pf, observed.filter(pl.col("store_id") != "S1"), regions, vocab)
    np.testing.assert_array_equal(
        no_own_row.dense(no_own_row.rows_of(pl.Series(["S1"]), pl.Series([5]))), dense[:1]
    )


def test_counterfactual_prices_reprice_the_shelf_exactly():
    vocab = ProductVocab(("P1", "P2"))
    shelf = ShelfPrices.build(*_shelf_inputs(own_depth=0.5), vocab)
    dense = shelf.dense(shelf.rows_of(pl.Series(["S1"]), pl.Series([5])))
    repriced = with_price_multipliers(
        torch.from_numpy(dense), torch.tensor([0.0, np.log(1.5), np.log(0.5), 0.0, 0.0])
    )
    # P1: price x 1.5 at depth 0.3 -> depth 1 - 0.7 * 1.5 < 0 -> 0, no promotion; log relative +
    # log 1.5.
    np.testing.assert_allclose(
        repriced[0, 1].numpy(), [np.log(0.7 * 1.5), 0.0, 0.0, 1.0, 0.0, 0.0], atol=1e-6
    )
    # P2 at half price: a 50% promotion.
    np.testing.assert_allclose(
        repriced[0, 2].numpy(), [np.log(2.0 * 0.5), 0.5, 1.0, 1.0, 0.0, 0.0], atol=1e-6
    )


def test_a_given_mission_changes_the_simulation_and_none_is_the_default(world):
    model, vocab, batch, book, _ = world
    given = torch.ones(len(batch["basket_labels"]), dtype=torch.bool)
    honest = generate(model, batch, book, seed=0, sizes=torch.full((len(given),), 3))
    told = generate(
        model, batch, book, seed=0, sizes=torch.full((len(given),), 3), given_mission=given
    )
    assert honest == generate(
        model,
        {**batch, "basket_labels": batch["basket_labels"].flip(0)},
        book,
        seed=0,
        sizes=torch.full((len(given),), 3),
    )  # labels are never read
    assert honest != told


def _generate_by_full_passes(model, batch, book, sizes, seed):
    """The reference of ``generate``: every slot a full forward pass over every context (the
    encoder, the shelf and the repeat head again), the live baskets' slots drawn from it."""
    from retailsim_core.datasets.tokens import PAD

    gen = torch.Generator().manual_seed(seed)
    b = len(book)
    tokens = torch.full((b, int(sizes.max())), PAD, dtype=torch.long)
    prices = torch.zeros(*tokens.shape, book.shape[-1])
    chosen = model.excluded(b)
    with torch.no_grad():
        for t in range(tokens.shape[1]):
            live = torch.nonzero(t < sizes).flatten()
            tokens[live, t] = model.mask_token
            seen = tokens[:, : t + 1]
            out = model(
                {**batch, "item_prices": prices[:, : t + 1]}, seen, seen == model.mask_token
            )
            slot = torch.full((len(live),), t)
            log_p = model.slot_log_probs(out, live, slot, chosen[live])
            pick = torch.multinomial(torch.softmax(log_p.double(), -1), 1, generator=gen)[:, 0]
            tokens[live, t], prices[live, t] = pick, book[live, pick]
            chosen[live, pick] = True
    return [[int(x) for x in row if 0 < x < model.mask_token] for row in tokens]


def test_generation_encodes_once_and_decodes_the_live_baskets_as_full_passes_do(world):
    model, _, batch, book, _ = world
    sizes = torch.tensor([1, 5, 2, 7, 3, 1, 4, 6, 2, 2, 8, 1])
    fast = generate(model, batch, book, seed=11, sizes=sizes)
    assert fast == _generate_by_full_passes(model, batch, book, sizes, seed=11)
    assert [len(x) for x in fast] == sizes.tolist()


def test_decoding_some_rows_matches_the_forward_pass(world):
    model, _, batch, _, _ = world
    inputs, query = model.query_inputs(batch)
    hidden = torch.ones_like(query, dtype=torch.bool)
    with torch.no_grad():
        full = model(inputs, query, hidden)
        rows = torch.tensor([0, 3, 4, 9])
        enc = model.encode(inputs)
        part = model.decode(enc, query[rows], inputs["item_prices"][rows], hidden[rows], rows)
    torch.testing.assert_close(part.hidden[rows], full.hidden[rows])
    others = torch.ones(len(query), dtype=torch.bool)
    others[rows] = False
    assert (part.hidden[others] == 0).all()  # finished baskets: no state
    torch.testing.assert_close(part.shelf, full.shelf)


def test_held_units_are_the_chance_the_basket_holds_the_product():
    size = torch.tensor([[1.0], [4.0]], dtype=torch.float64)
    p = torch.tensor([[0.0, 0.25, 1.0]], dtype=torch.float64)
    expected = [[0.0, 0.25, 1.0], [0.0, 1 - 0.75**4, 1.0]]
    torch.testing.assert_close(held(size, p), torch.tensor(expected, dtype=torch.float64))


@settings(max_examples=60, deadline=None)
@given(st.floats(1.0, 30.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0))  # a basket holds >= 1
def test_held_units_never_exceed_one_or_size_times_p(size, p, q):
    s = torch.tensor(size, dtype=torch.float64)
    lo, hi = sorted((p, q))
    low, high = (
        held(s, torch.tensor(lo, dtype=torch.float64)),
        held(s, torch.tensor(hi, dtype=torch.float64)),
    )
    assert 0.0 <= float(low) <= min(1.0, size * lo) + 1e-12
    assert float(low) <= float(high) + 1e-12  # more likely per slot, more likely held


def test_the_jacobian_in_chunks_of_contexts_equals_the_whole_batchs(world):
    """Chunks add their dE_i / d log p and their E_i: the same elasticities as one pass."""
    model, vocab, batch, _, _ = world
    size = torch.linspace(2.0, 9.0, len(batch["basket_labels"]))
    units = expected_units(model, batch, size)
    products = torch.topk(units[1 : vocab.n_products + 1], 3).indices.numpy() + 1
    whole = jacobian_rows(model, batch, size, products)
    for chunk in (1, 5, 64):
        np.testing.assert_allclose(
            jacobian_rows(model, batch, size, products, chunk), whole, rtol=1e-4, atol=1e-6
        )
    assert np.abs(whole).max() > 0  # a real response is compared, not zeros


def test_the_expected_basket_size_keeps_no_graph(world):
    """Every caller holds the size as a constant; a graph would keep each (B, V) activation of
    its forward alive as long as the size (D126)."""
    model, _, batch, _, _ = world
    size = expected_basket_size(model, batch)
    assert not size.requires_grad and size.grad_fn is None
    assert (size >= 1).all()  # at least one product: a real expectation, not zeros


def test_sizes_and_units_in_chunks_equal_one_forward(world):
    """The elasticity contexts' sizes and units a chunk at a time (D126): the same figures."""
    model, _, batch, _, _ = world
    n = len(batch["basket_labels"])
    size = expected_basket_size(model, batch)
    with torch.no_grad():
        units = expected_units(model, batch, size)
    for chunk in (None, 1, 5):
        got_size, got_units = sizes_and_units(model, batch, n, chunk)
        torch.testing.assert_close(got_size, size)
        torch.testing.assert_close(got_units, units.double(), rtol=1e-5, atol=1e-6)
    assert units.sum() > 0
