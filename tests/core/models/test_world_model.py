"""The world model on real tiny-world batches: shapes, padding, masking traps, vocabulary, losses."""

import math

import numpy as np
import polars as pl
import pytest
import torch

from retailsim_core.models.losses import LossWeights, focal_loss, sampled_candidates, world_model_loss
from retailsim_core.models.world_model import REPEAT_FEATURES, WorldModelConfig, parameter_count, repeat_features
from retailsim_core.pipeline.embeddings import load_embeddings
from retailsim_core.pipeline.world_model import build_model, load_model_inputs
from retailsim_core.tokens import PAD
from retailsim_core.training.corruption import corrupt, suffix_mask

CFG = WorldModelConfig.preset("tiny")


@pytest.fixture(scope="module")
def tiny(tiny_warehouse):
    inputs = load_model_inputs(tiny_warehouse["warehouse"])
    data = inputs.training_set(inputs.samples)
    model = build_model(CFG, inputs.product_table, data.t1_numeric.shape[1], seed=0).eval()
    return inputs, data, model


def _rows_with_history(data, n=6):
    h = data.hist_end - data.hist_start
    return list(np.flatnonzero(h > 2)[:n])


def test_forward_shapes_and_heads(tiny):
    _, data, model = tiny
    batch = data[_rows_with_history(data)]
    out = model(batch, batch["tokens"])
    B, L = batch["tokens"].shape
    assert out.hidden.shape == (B, L + 1, CFG.d_model)
    assert out.repeat_features.dense(data.vocab.size).shape == (B, data.vocab.size, len(REPEAT_FEATURES))
    assert {k: v.shape[1] for k, v in out.aux_logits.items()} == {"mission_type": 3, "mission_focus": 4,
                                                                   "price_sensitivity": 3, "basket_size": 3}
    logits = model.product_logits(out, torch.tensor([0, 1]), torch.tensor([0, 0]))
    assert logits.shape == (2, data.vocab.size) and torch.isinf(logits[:, [PAD, data.vocab.mask]]).all()


def test_padding_does_not_change_a_sequence(tiny):
    _, data, model = tiny
    h = data.hist_end - data.hist_start
    short, long = int(np.flatnonzero((h > 0) & (h < 4))[0]), int(np.argmax(h))
    alone = data[[short]]
    both = data[[short, long]]
    assert both["history_tokens"].shape[1] > alone["history_tokens"].shape[1]    # padding was added
    with torch.no_grad():
        a = model(alone, alone["tokens"]).hidden[0]
        b = model(both, both["tokens"]).hidden[0, : a.shape[0]]
    real = torch.cat([torch.tensor([True]), alone["tokens"][0] != PAD])
    torch.testing.assert_close(a[real], b[real], atol=1e-5, rtol=1e-5)


def test_masked_position_never_sees_its_product_or_price(tiny):
    _, data, model = tiny
    batch = data[_rows_with_history(data, 3)]
    tokens = batch["tokens"].clone()
    hidden = torch.zeros_like(tokens, dtype=torch.bool)
    hidden[:, 0] = True
    tokens[:, 0] = data.vocab.mask
    other = {**batch, "t4_prices": batch["t4_prices"].clone()}
    other["t4_prices"][:, 0] = torch.rand_like(other["t4_prices"][:, 0]) * 50      # the true product's price
    with torch.no_grad():
        a = model(batch, tokens, hidden=hidden).hidden
        b = model(other, tokens, hidden=hidden).hidden
    torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_auxiliary_heads_never_see_the_t6_they_predict(tiny):
    _, data, model = tiny
    batch = data[_rows_with_history(data, 4)]
    shuffled = {**batch, "t6": batch["t6"].flip(0)}
    hide = torch.ones(4, dtype=torch.bool)
    with torch.no_grad():
        a, b = model(batch, batch["tokens"], hide_t6=hide), model(shuffled, batch["tokens"], hide_t6=hide)
        c = model(batch, batch["tokens"])
    for name in a.aux_logits:
        torch.testing.assert_close(a.aux_logits[name], b.aux_logits[name], atol=0, rtol=0)
    assert not torch.equal(a.aux_logits["basket_size"], c.aux_logits["basket_size"])   # T6 is an input otherwise


def test_one_vocabulary_from_samples_to_graphsage_rows_and_output_head(tiny, tiny_warehouse):
    inputs, data, model = tiny
    vectors, id_map = load_embeddings(tiny_warehouse["warehouse"])
    sample = inputs.samples.row(5, named=True)
    basket = inputs.store.trips.filter(pl.col("basket_id") == sample["basket_id"])["products"][0].to_list()
    tokens = data[[5]]["tokens"][0]
    by_token = dict(zip(inputs.vocab.frame()["token"], inputs.vocab.frame()["product_id"]))
    assert sorted(by_token[t] for t in tokens.tolist() if 1 <= t <= inputs.vocab.n_products) == sorted(basket)
    for product in basket[:3]:
        token = inputs.vocab.products.index(product) + 1
        row = id_map.filter(pl.col("product_id") == product)["row"][0]
        torch.testing.assert_close(model.product_table[token], vectors[row] / vectors[row].norm())  # T2 row
        emb, _ = model.output_embeddings(torch.tensor([token]))
        torch.testing.assert_close(emb[0], model.item_out(vectors[row] / vectors[row].norm()))  # output head


def test_every_basket_item_finds_its_week_price(tiny):
    _, data, _ = tiny
    batch = data[list(range(len(data)))]
    items = (batch["tokens"] >= 1) & (batch["tokens"] <= data.vocab.n_products)
    assert (batch["t4_prices"][..., 0][items] > 0).all()                            # (product, store, week) hit


def test_repeat_features_count_history_purchases():
    tokens = torch.tensor([[[3, 4, 0], [3, 0, 0], [0, 0, 0]]])                      # two trips, then padding
    mask = torch.tensor([[True, True, False]])
    days = torch.tensor([[10, 3, 0]])
    focus = torch.tensor([[2, 1, 0]])                                                 # Grocery, then Fresh
    sparse = repeat_features(tokens, mask, days, history_focus=focus)
    assert sorted(p for p in sparse.products[0].tolist() if p != PAD) == [3, 4]      # the 2 distinct products
    f = sparse.dense(vocab_size=6)
    names = dict(zip(REPEAT_FEATURES, f[0, 3].tolist()))
    assert names["log_count"] == pytest.approx(math.log(3)) and names["share_of_trips"] == pytest.approx(1.0)
    assert names["decay_14d"] == pytest.approx(math.exp(-10 / 14) + math.exp(-3 / 14))
    assert names["recency"] == pytest.approx(math.exp(-3 / 30)) and names["bought"] == 1.0
    assert f[0, 4, 0] == pytest.approx(math.log(2)) and f[0, 4, 5] == pytest.approx(math.exp(-10 / 30))
    assert names["log_count_fresh"] == pytest.approx(math.log(2)) and names["log_count_grocery"] == pytest.approx(math.log(2))
    assert names["log_count_mixed"] == 0 and dict(zip(REPEAT_FEATURES, f[0, 4].tolist()))["log_count_fresh"] == 0
    assert f[0, [0, 1, 2, 5]].abs().sum() == 0                                       # PAD and unseen products


def test_trip_inputs_equal_the_projected_mean_of_the_trips_products(tiny):
    _, data, model = tiny
    batch = data[_rows_with_history(data, 4)]
    batch["history_tokens"] = batch["history_tokens"].clone()
    batch["history_tokens"][0, 0] = PAD                                              # an empty trip
    seen = {}
    hook = model.encoder.blocks[0].register_forward_pre_hook(lambda _, args: seen.setdefault("x", args[0]))
    with torch.no_grad():
        model.encoder(model.product_table, batch)
    hook.remove()
    with torch.no_grad():
        tokens, mask = batch["history_tokens"].long(), batch["history_mask"]
        real = (tokens != PAD)[..., None].float()
        means = (model.product_table[tokens] * real).sum(2) / real.sum(2).clamp(min=1)   # (B, H, G)
        days = batch["history_days_before"].float().clamp(min=0)[..., None]
        ctx, enc = batch["history_context"], model.encoder
        want = (enc.items(means) + enc.trip_type(ctx[..., 0]) + enc.trip_focus(ctx[..., 1])
                + enc.gap(torch.cat([torch.log1p(days), days / 365.0], dim=-1))) * mask[..., None]
    torch.testing.assert_close(seen["x"], want, atol=1e-5, rtol=1e-5)


def test_sparse_repeat_scores_equal_the_dense_features():
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 9, (3, 4, 5), generator=g)                             # repeats and [PAD]s
    mask = torch.tensor([[True, True, True, False], [False] * 4, [True] * 4])      # row 1: no history
    days = torch.randint(0, 60, (3, 4), generator=g)
    sparse = repeat_features(tokens, mask, days, history_focus=torch.randint(0, 5, (3, 4), generator=g))
    dense = sparse.dense(vocab_size=9)
    assert dense[1].abs().sum() == 0 and dense[0, 0].abs().sum() == 0
    rows, gate = torch.tensor([2, 0, 1, 2]), torch.randn(4, len(REPEAT_FEATURES), generator=g)
    torch.testing.assert_close(sparse.logits(rows, gate, 9), torch.einsum("mf,mvf->mv", gate, dense[rows]))
    candidates = torch.tensor([5, 0, 8, 3])
    torch.testing.assert_close(sparse.at(rows, candidates, 9), dense[rows][:, candidates])


def test_focal_loss_matches_hand_computation():
    logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    p0 = math.exp(2) / (math.exp(2) + 2)
    p1 = math.e / (math.e + 2)
    expected = [-(1 - p0) ** 2 * math.log(p0), -(1 - p1) ** 2 * math.log(p1)]
    torch.testing.assert_close(focal_loss(logits, torch.tensor([0, 1])), torch.tensor(expected))


def test_focal_loss_is_normalised_by_masked_positions(tiny, monkeypatch):
    _, data, model = tiny
    batch = data[[0, 1]]
    L = batch["tokens"].shape[1]
    targets = torch.zeros(2, L, dtype=torch.long)
    targets[0, 0], targets[1, 0] = batch["tokens"][0, 0], batch["tokens"][1, 0]
    targets[0, 1] = batch["tokens"][0, 1] if batch["tokens"][0, 1] <= data.vocab.n_products else 0
    inputs = torch.where(targets != PAD, data.vocab.mask, batch["tokens"])
    n = int((targets != PAD).sum())
    fixed = torch.zeros(n, data.vocab.size)
    fixed[:, 1] = 1.0
    monkeypatch.setattr(model, "product_logits", lambda out, rows, cols, candidates=None: fixed.clone())
    model.eval()
    with torch.no_grad():
        out = model(batch, inputs, hidden=targets != PAD)
        loss = world_model_loss(model, out, batch, inputs, targets, torch.zeros(2, dtype=torch.bool),
                                LossWeights.focal_only(), torch.Generator().manual_seed(0), torch.nn.Identity())
    # By hand: each position's softmax runs over the vocabulary minus the products shown unmasked
    # in its basket; FL = -(1 - p)^2 log p; the sum is divided by the 3 masked positions.
    expected = 0.0
    for (r, c) in torch.nonzero(targets != PAD).tolist():
        shown = {int(t) for t, y in zip(inputs[r], targets[r]) if y == PAD and 1 <= t <= data.vocab.n_products}
        z = sum(math.exp(fixed[0, v].item()) for v in range(data.vocab.size) if v not in shown)
        p = math.exp(fixed[0, int(targets[r, c])].item()) / z
        expected += -(1 - p) ** 2 * math.log(p)
    expected /= n
    assert n == 3 and loss.total.item() == pytest.approx(expected, rel=1e-5)


def test_no_gradient_reaches_pad_positions_or_the_pad_embedding(tiny):
    inputs, data, _ = tiny
    model = build_model(CFG, inputs.product_table, data.t1_numeric.shape[1], seed=1).train()
    batch = data[_rows_with_history(data)]
    rng = np.random.default_rng(0)
    x, y = corrupt(batch["tokens"].numpy(), data.vocab, 0.3, 0.3, rng)
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    out = model(batch, x, hidden=y != PAD, hide_t6=torch.ones(len(x), dtype=torch.bool))
    out.hidden.retain_grad()
    loss = world_model_loss(model, out, batch, x, y, torch.ones(len(x), dtype=torch.bool), LossWeights(),
                            torch.Generator().manual_seed(0), torch.nn.Linear(CFG.d_model, CFG.d_model))
    loss.total.backward()
    assert model.product_table.grad[PAD].abs().sum() == 0
    pad = torch.cat([torch.zeros(len(x), 1, dtype=torch.bool), x == PAD], dim=1)
    assert out.hidden.grad[pad].abs().sum() == 0
    assert all(p.grad is not None for n, p in model.named_parameters() if p.requires_grad and "aux" in n)


def test_sampled_softmax_candidates_hold_every_target():
    targets = torch.tensor([5, 9, 5, 102])
    cand, col = sampled_candidates(targets, n_products=100, eos=102, n_negatives=20,
                                   generator=torch.Generator().manual_seed(0))
    assert torch.equal(cand[col], targets) and len(torch.unique(cand)) == len(cand)
    full, _ = sampled_candidates(targets, 100, 102, 512, torch.Generator())
    assert set(range(1, 101)) <= set(full.tolist())


def test_suffix_masking_is_one_generation_step():
    tokens = np.array([[3, 4, 9, 0], [5, 9, 0, 0]])      # 9 = [EOS] of an 7-product vocabulary
    from retailsim_core.tokens import ProductVocab
    vocab = ProductVocab(tuple(f"P{i}" for i in range(7)))
    x, y = suffix_mask(tokens, vocab, np.random.default_rng(1))
    for xi, yi, ti in zip(x, y, tokens):
        cut = int(np.flatnonzero(xi == vocab.mask)[0])
        assert (xi[:cut] == ti[:cut]).all() and (xi[cut + 1:] == PAD).all()
        assert yi[cut] == ti[cut] and (np.delete(yi, cut) == PAD).all()


def test_paper_preset_builds_and_takes_one_training_step(tiny):
    inputs, data, _ = tiny
    cfg = WorldModelConfig.preset("paper")
    model = build_model(cfg, inputs.product_table, data.t1_numeric.shape[1], seed=0).train()
    batch = data[_rows_with_history(data, 2)]
    x, y = corrupt(batch["tokens"].numpy(), data.vocab, 0.15, 0.0, np.random.default_rng(0))
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    out = model(batch, x, hidden=y != PAD)
    loss = world_model_loss(model, out, batch, x, y, torch.zeros(2, dtype=torch.bool), LossWeights(),
                            torch.Generator().manual_seed(0), torch.nn.Linear(cfg.d_model, cfg.d_model))
    loss.total.backward()
    torch.optim.AdamW(model.parameters(), lr=1e-5).step()
    assert torch.isfinite(loss.total) and parameter_count(model) > 10_000_000


def test_item_shuffling_permutes_products_with_their_prices_only():
    from retailsim_core.tokens import ProductVocab
    from retailsim_core.training.corruption import shuffle_items
    vocab = ProductVocab(tuple(f"P{i}" for i in range(7)))
    tokens = np.array([[3, 4, 5, 9, 0], [6, 9, 0, 0, 0]])                              # 9 = [EOS]
    prices = tokens[..., None].astype(np.float32) * np.ones((1, 1, 9), dtype=np.float32)
    seen = set()
    for seed in range(20):
        t, p = shuffle_items(tokens, prices, vocab, np.random.default_rng(seed))
        assert sorted(t[0, :3]) == [3, 4, 5] and list(t[0, 3:]) == [9, 0] and list(t[1]) == [6, 9, 0, 0, 0]
        assert (p[..., 0] == t).all()                                                # each price follows its product
        seen.add(tuple(t[0, :3]))
    assert len(seen) > 3


def test_basket_queries_ask_one_slot_for_every_product():
    from retailsim_core.tokens import ProductVocab
    from retailsim_core.training.corruption import basket_queries
    vocab = ProductVocab(tuple(f"P{i}" for i in range(7)))
    tokens = np.array([[3, 4, 5, 9, 0], [6, 9, 0, 0, 0]])                              # 9 = [EOS]
    x, y, (rows, targets) = basket_queries(tokens, tokens.copy(), np.zeros_like(tokens), vocab, 1.0,
                                           np.random.default_rng(0))
    assert (x[:, 0] == vocab.mask).all() and (x[:, 1:] == PAD).all() and (y == PAD).all()
    assert list(zip(rows.tolist(), targets.tolist())) == [(0, 3), (0, 4), (0, 5), (1, 6)]   # never [EOS]
    x0, _, (r0, _) = basket_queries(tokens, tokens.copy(), np.zeros_like(tokens), vocab, 0.0, np.random.default_rng(0))
    assert (x0 == tokens).all() and len(r0) == 0


def test_price_response_matches_hand_computation_with_substitutes():
    from retailsim_core.models.world_model import PriceResponse
    # Vocabulary of 4 tokens; products 1 and 2 are substitutes (both directions), 3 has none.
    pr = PriceResponse(d_model=2, vocab_size=4, substitutes=torch.tensor([[1, 2], [2, 1]]))
    shelf = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [-0.2, 0.2, 1.0, 1.0], [0.1, 0.5, 1.0, 1.0], [0.3, 0.0, 0.0, 1.0]]])
    feats = pr.features(shelf)                                        # log_rel, depth, available, substitutes' depth
    torch.testing.assert_close(feats[0, 1], torch.tensor([-0.2, 0.2, 1.0, 0.5]))
    torch.testing.assert_close(feats[0, 2], torch.tensor([0.1, 0.5, 1.0, 0.2]))
    torch.testing.assert_close(feats[0, 3], torch.tensor([0.3, 0.0, 1.0, 0.0]))
    with torch.no_grad():
        pr.raw_product_weights[1] = torch.tensor([2.0, 3.0]).expm1().log()    # softplus^-1: a = (2, -3)
        pr.context_weights.bias[:] = torch.tensor([0.5, 0.1])              # log relative price, available
        pr.scale.bias[:] = math.log(2.0)
    h = torch.zeros(1, 2)
    got = pr(h, feats, torch.tensor([0]), torch.tensor([1, 3]))        # candidates 1 and 3 of basket row 0
    # product 1: 0.5 * -0.2 + 0.1 * 1 + 2 * (2 * 0.2 - 3 * 0.5); product 3: 0.5 * 0.3 + 0.1 * 1
    torch.testing.assert_close(got, torch.tensor([[0.5 * -0.2 + 0.1 + 2 * (0.4 - 1.5), 0.15 + 0.1]]))
    torch.testing.assert_close(pr(h, feats, torch.tensor([0]), None)[:, [1, 3]], got)   # the whole-vocabulary path


def test_scores_over_candidates_equal_the_whole_vocabulary_scores(tiny):
    inputs, data, model = tiny
    batch = data[_rows_with_history(data, 3)]
    with torch.no_grad():
        out = model(batch, batch["tokens"])
        rows, cols = torch.tensor([2, 0, 2, 1]), torch.tensor([0, 1, 1, 0])
        full = model.product_logits(out, rows, cols)
        candidates = torch.tensor([1, 4, 3, 2])
        torch.testing.assert_close(model.product_logits(out, rows, cols, candidates), full[:, candidates])


def test_a_substitutes_price_cut_lowers_a_products_score_when_the_weight_says_so(tiny):
    inputs, data, model = tiny
    batch = data[_rows_with_history(data, 2)]
    edges = torch.tensor([[1, 2], [2, 1]])
    m = build_model(CFG, inputs.product_table, data.t1_numeric.shape[1], seed=0, substitutes=edges).eval()
    with torch.no_grad():
        m.price_response.raw_product_weights[1, -1] = 4.0              # product 1 loses share to 2's promotions
    shelf = batch["shelf"].clone()
    shelf[:, 2, 1] = 0.0
    base = m.next_basket({**batch, "shelf": shelf})[1]
    shelf[:, 2, 1] = 0.5
    promo = m.next_basket({**batch, "shelf": shelf})[1]
    assert (promo[:, 1] - base[:, 1] < -1.0).all()
    assert torch.allclose(promo[:, 3], base[:, 3])                  # a product without substitutes is unaffected


def test_substitute_edges_travel_with_the_weights(tiny, tmp_path):
    from retailsim_core.training import checkpoint as ckpt
    inputs, data, _ = tiny
    for edges in (torch.zeros(2, 0, dtype=torch.long), torch.tensor([[1, 2, 5], [2, 1, 7]])):
        m = build_model(CFG, inputs.product_table, data.t1_numeric.shape[1], seed=0, substitutes=edges)
        ckpt.save_tensors(tmp_path / "m.safetensors", m.state_dict())
        loaded = ckpt.load_tensors(tmp_path / "m.safetensors")
        assert torch.equal(loaded["price_response.substitute_edges"], edges)
