"""The world model on real tiny-world batches: shapes, padding, masking traps, vocabulary,
losses.
"""

import math

import numpy as np
import polars as pl
import pytest
import torch

from retailsim_core.datasets.tokens import PAD
from retailsim_core.models.heads.products import NEG
from retailsim_core.models.losses import LossWeights, world_model_loss
from retailsim_core.models.world_model import WorldModelConfig, parameter_count
from retailsim_core.pipeline.data.embeddings import load_embeddings
from retailsim_core.training.run.corruption import basket_queries, corrupt
from retailsim_core.training.run.model_setup import build_model
from tests.core.models.conftest import CFG, rows_with_history


def test_forward_shapes_and_heads(tiny):
    _, data, model = tiny
    batch = data[rows_with_history(data)]
    out = model(batch, batch["tokens"])
    B, L = batch["tokens"].shape
    assert out.hidden.shape == (B, L + 1, CFG.d_model)
    assert out.repeat_products.shape == batch["repeat_values"].shape[:2]
    assert {k: v.shape[1] for k, v in out.aux_logits.items()} == {
        "mission_type": 3,
        "mission_focus": 4,
        "price_sensitivity": 3,
        "basket_size": 3,
    }
    assert out.size_logits.shape == (B, CFG.max_items)
    log_p = model.slot_log_probs(out, torch.tensor([0, 1]), torch.tensor([0, 0]))
    assert log_p.shape == (2, data.vocab.size)
    assert (log_p[:, [PAD, data.vocab.mask, data.vocab.eos]] == NEG).all()
    torch.testing.assert_close(log_p.exp().sum(1), torch.ones(2))  # a proper distribution


def test_padding_does_not_change_a_sequence(tiny):
    _, data, model = tiny
    h = data.hist_end - data.hist_start
    short, long = int(np.flatnonzero((h > 0) & (h < 4))[0]), int(np.argmax(h))
    alone = data[[short]]
    both = data[[short, long]]
    assert both["history_mask"].shape[1] > alone["history_mask"].shape[1]  # padding was added
    with torch.no_grad():
        a = model(alone, alone["tokens"])
        b = model(both, both["tokens"])
        a_lp = model.slot_log_probs(a, torch.tensor([0]), torch.tensor([0]))
        b_lp = model.slot_log_probs(b, torch.tensor([0]), torch.tensor([0]))
    real = torch.cat([torch.tensor([True]), alone["tokens"][0] != PAD])
    torch.testing.assert_close(
        a.hidden[0][real], b.hidden[0, : real.shape[0]][real], atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(a_lp, b_lp, atol=1e-4, rtol=1e-4)


def test_masked_position_never_sees_its_product_or_price(tiny):
    _, data, model = tiny
    batch = data[rows_with_history(data, 3)]
    tokens = batch["tokens"].clone()
    hidden = torch.zeros_like(tokens, dtype=torch.bool)
    hidden[:, 0] = True
    tokens[:, 0] = data.vocab.mask
    other = {**batch, "item_prices": batch["item_prices"].clone()}
    other["item_prices"][:, 0] = (
        torch.rand_like(other["item_prices"][:, 0]) * 50
    )  # the true product's price
    with torch.no_grad():
        a = model(batch, tokens, hidden=hidden).hidden
        b = model(other, tokens, hidden=hidden).hidden
    torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_no_label_of_the_basket_is_seen_unless_its_mission_is_given(tiny):
    """D52: by default nothing of T6 enters; given a mission, only its type and focus do; a
    basket's price sensitivity and size are labels of its contents, never inputs."""
    _, data, model = tiny
    batch = data[rows_with_history(data, 4)]
    flipped = {**batch, "basket_labels": batch["basket_labels"].flip(0)}
    labels_only = {**batch, "basket_labels": batch["basket_labels"].clone()}
    labels_only["basket_labels"][:, 2:] = labels_only["basket_labels"][:, 2:].flip(0)
    given = torch.ones(4, dtype=torch.bool)
    with torch.no_grad():
        honest, honest_flipped = model.next_basket(batch)[1], model.next_basket(flipped)[1]
        told = model(batch, batch["tokens"], given_mission=given)
        told_labels = model(labels_only, batch["tokens"], given_mission=given)
        told_flipped = model(flipped, batch["tokens"], given_mission=given)
    torch.testing.assert_close(honest, honest_flipped, atol=0, rtol=0)
    for name in told.aux_logits:
        torch.testing.assert_close(
            told.aux_logits[name], told_labels.aux_logits[name], atol=0, rtol=0
        )
    assert not torch.equal(told.aux_logits["basket_size"], told_flipped.aux_logits["basket_size"])


def test_one_vocabulary_from_samples_to_graphsage_rows_and_output_head(tiny, tiny_warehouse):
    inputs, data, model = tiny
    vectors, id_map = load_embeddings(tiny_warehouse["warehouse"])
    sample = inputs.samples.row(5, named=True)
    basket = inputs.store.trips.filter(pl.col("basket_id") == sample["basket_id"])["products"][
        0
    ].to_list()
    tokens = data[[5]]["tokens"][0]
    by_token = dict(
        zip(inputs.vocab.frame()["token"], inputs.vocab.frame()["product_id"], strict=True)
    )
    assert sorted(
        by_token[t] for t in tokens.tolist() if 1 <= t <= inputs.vocab.n_products
    ) == sorted(basket)
    for product in basket[:3]:
        token = inputs.vocab.products.index(product) + 1
        row = id_map.filter(pl.col("product_id") == product)["row"][0]
        torch.testing.assert_close(
            model.product_table[token], vectors[row] / vectors[row].norm()
        )  # T2 row
        torch.testing.assert_close(
            model.item_out(model.product_table[token]),
            model.item_out(vectors[row] / vectors[row].norm()),
        )  # output head


def test_every_basket_item_finds_its_week_price(tiny):
    _, data, _ = tiny
    batch = data[list(range(len(data)))]
    items = (batch["tokens"] >= 1) & (batch["tokens"] <= data.vocab.n_products)
    assert (batch["item_prices"][..., 0][items] > 0).all()  # (product, store, week) hit


def test_trip_inputs_equal_the_projected_mean_of_all_the_trips_products(tiny):
    _, data, model = tiny
    batch = data[rows_with_history(data, 4)]
    seen = {}
    hook = model.encoder.blocks[0].register_forward_pre_hook(
        lambda _, args: seen.setdefault("x", args[0])
    )
    with torch.no_grad():
        model.encoder(model.product_table, batch)
    hook.remove()
    mask = batch["history_mask"]
    b, h = mask.shape
    items, offsets = batch["history_items"], batch["history_offsets"]
    ends = torch.cat([offsets[1:], torch.tensor([len(items)])])
    with torch.no_grad():
        means = torch.zeros(b * h, model.product_table.shape[1])
        for bag in range(b * h):  # the slow, obvious way: bag by bag
            tokens = items[offsets[bag] : ends[bag]]
            tokens = tokens[tokens != PAD]
            if len(tokens):
                means[bag] = model.product_table[tokens].mean(0)
        days = batch["history_days_before"].float().clamp(min=0)[..., None]
        ctx, enc = batch["history_context"], model.encoder
        want = (
            enc.items(means.reshape(b, h, -1))
            + enc.trip_type(ctx[..., 0])
            + enc.trip_focus(ctx[..., 1])
            + enc.gap(torch.cat([torch.log1p(days), days / 365.0], dim=-1))
        ) * mask[..., None]
    torch.testing.assert_close(seen["x"], want, atol=1e-5, rtol=1e-5)
    # every product of every trip is read: the longest trip is not cut
    lengths = np.diff(data.trip_offsets)
    assert int((ends - offsets).max()) == int(
        lengths[
            np.concatenate(
                [
                    np.arange(s, e)
                    for s, e in zip(
                        data.hist_start[rows_with_history(data, 4)],
                        data.hist_end[rows_with_history(data, 4)],
                        strict=False,
                    )
                ]
            )
        ].max()
    )


def test_each_basket_weighs_once_in_the_product_loss(tiny, monkeypatch):
    """Masked positions and a next-basket query whose targets are the basket's products: each
    row's targets share a weight of one; the softmax runs over the whole vocabulary minus the
    products shown unmasked in the basket."""
    _, data, model = tiny
    batch = data[[0, 1, 2]]
    L = batch["tokens"].shape[1]
    targets = torch.zeros(3, L, dtype=torch.long)
    targets[0, 0], targets[1, 0] = batch["tokens"][0, 0], batch["tokens"][1, 0]
    targets[0, 1] = batch["tokens"][0, 1] if batch["tokens"][0, 1] <= data.vocab.n_products else 0
    inputs = torch.where(targets != PAD, data.vocab.mask, batch["tokens"])
    inputs[2] = PAD
    inputs[2, 0] = data.vocab.mask
    query_tokens = batch["tokens"][2][
        (batch["tokens"][2] >= 1) & (batch["tokens"][2] <= data.vocab.n_products)
    ]
    query = (torch.full((len(query_tokens),), 2), query_tokens)
    fixed = torch.zeros(data.vocab.size)
    fixed[1] = 1.0

    def slot_log_probs(out, rows, cols, shown=None):
        logits = fixed.expand(len(rows), -1).masked_fill(
            model.excluded(len(rows), shown), -torch.inf
        )
        return torch.log_softmax(logits, -1)

    monkeypatch.setattr(model, "slot_log_probs", slot_log_probs)
    with torch.no_grad():
        out = model(batch, inputs, hidden=targets != PAD)
        loss = world_model_loss(
            model,
            out,
            batch,
            inputs,
            targets,
            torch.zeros(3, dtype=torch.bool),
            LossWeights.focal_only(),
            torch.Generator().manual_seed(0),
            torch.nn.Identity(),
            basket_targets=query,
        )
    specials = {PAD, data.vocab.mask, data.vocab.eos}

    def fl(row, token):
        shown = {
            int(t)
            for t, y in zip(inputs[row], targets[row], strict=True)
            if y == PAD and 1 <= t <= data.vocab.n_products
        }
        z = sum(
            math.exp(fixed[v].item()) for v in range(data.vocab.size) if v not in shown | specials
        )
        p = math.exp(fixed[token].item()) / z
        return -((1 - p) ** 2) * math.log(p)

    per_row = []
    for r in (0, 1):
        cols = torch.nonzero(targets[r]).flatten().tolist()
        per_row.append(sum(fl(r, int(targets[r, c])) for c in cols) / len(cols))
    per_row.append(sum(fl(2, int(t)) for t in query_tokens) / len(query_tokens))
    assert loss.total.item() == pytest.approx(sum(per_row) / 3, rel=1e-5)


def test_no_gradient_reaches_pad_positions_or_the_pad_embedding(tiny):
    inputs, data, _ = tiny
    model = build_model(CFG, inputs.product_table, data.customer_numeric.shape[1], seed=1).train()
    batch = data[rows_with_history(data)]
    rng = np.random.default_rng(0)
    x, y = corrupt(batch["tokens"].numpy(), data.vocab, 0.3, 0.3, rng)
    x, y, (q_rows, q_tokens) = basket_queries(batch["tokens"].numpy(), x, y, data.vocab, 0.5, rng)
    assert 0 < len(np.unique(q_rows)) < len(x)
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    out = model(batch, x, hidden=y != PAD)
    out.hidden.retain_grad()
    loss = world_model_loss(
        model,
        out,
        batch,
        x,
        y,
        torch.zeros(len(x), dtype=torch.bool),
        LossWeights(),
        torch.Generator().manual_seed(0),
        torch.nn.Linear(CFG.d_model, CFG.d_model),
        basket_targets=(torch.from_numpy(q_rows), torch.from_numpy(q_tokens)),
    )
    loss.total.backward()
    assert model.product_table.grad[PAD].abs().sum() == 0
    pad = torch.cat([torch.zeros(len(x), 1, dtype=torch.bool), x == PAD], dim=1)
    assert out.hidden.grad[pad].abs().sum() == 0
    assert all(
        p.grad is not None for n, p in model.named_parameters() if p.requires_grad and "aux" in n
    )
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_paper_preset_builds_and_takes_one_training_step(tiny):
    inputs, data, _ = tiny
    cfg = WorldModelConfig.preset("paper")
    model = build_model(cfg, inputs.product_table, data.customer_numeric.shape[1], seed=0).train()
    batch = data[rows_with_history(data, 2)]
    x, y = corrupt(batch["tokens"].numpy(), data.vocab, 0.15, 0.0, np.random.default_rng(0))
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    out = model(batch, x, hidden=y != PAD)
    loss = world_model_loss(
        model,
        out,
        batch,
        x,
        y,
        torch.zeros(2, dtype=torch.bool),
        LossWeights(),
        torch.Generator().manual_seed(0),
        torch.nn.Linear(cfg.d_model, cfg.d_model),
    )
    loss.total.backward()
    torch.optim.AdamW(model.parameters(), lr=1e-5).step()
    assert torch.isfinite(loss.total) and parameter_count(model) > 10_000_000


def test_a_customer_without_history_gets_the_popular_products_first(tiny):
    """Defect 3 of issue #17: with uniform sampled negatives and no log-Q correction the most
    popular products got the lowest generative biases, so a customer with no history saw them
    last. The explore distribution is a full softmax: after a few steps of next-basket queries,
    its ranking for an empty history follows popularity."""
    from scipy.stats import spearmanr

    from retailsim_core.training.run.corruption import basket_queries
    from retailsim_core.training.scoring.validation import popularity_scores

    inputs, data, _ = tiny
    model = build_model(CFG, inputs.product_table, data.customer_numeric.shape[1], seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-2)
    rng = np.random.default_rng(0)
    rows = np.arange(len(data))
    for step in range(40):
        batch = data[np.sort(rng.choice(rows, 64, replace=False))]
        tokens = batch["tokens"].numpy()
        x, y, (qr, qt) = basket_queries(
            tokens, tokens.copy(), np.zeros_like(tokens), data.vocab, 1.0, rng
        )
        x, y = torch.from_numpy(x), torch.from_numpy(y)
        out = model(batch, x, hidden=x == data.vocab.mask)
        loss = world_model_loss(
            model,
            out,
            batch,
            x,
            y,
            torch.zeros(len(x), dtype=torch.bool),
            LossWeights.focal_only(),
            torch.Generator().manual_seed(step),
            torch.nn.Identity(),
            basket_targets=(torch.from_numpy(qr), torch.from_numpy(qt)),
        )
        opt.zero_grad()
        loss.total.backward()
        opt.step()
    cold = [int(r) for r in np.flatnonzero(data.hist_end == data.full_hist_start)[:16]]
    with torch.no_grad():
        log_p = model.train(False).next_basket(data[cold])[1].mean(0)[1 : data.vocab.n_products + 1]
    pop = popularity_scores(data, rows)[1 : data.vocab.n_products + 1]
    assert spearmanr(log_p.numpy(), pop).statistic > 0.5
    top_pop, top_model = set(np.argsort(-pop)[:20]), set(torch.topk(log_p, 20).indices.tolist())
    assert len(top_pop & top_model) >= 10


def test_position_zero_heads_learn_only_where_nothing_of_the_basket_is_shown(tiny):
    """The size and auxiliary heads are asked before the trip (simulation, calibration): rows whose
    decoder sees products of the basket must not train them, or the heads read the answer off the
    input. Only the next-basket query rows reach their logits' gradients."""
    _, data, model = tiny
    batch = data[rows_with_history(data)]
    rng = np.random.default_rng(1)
    x, y = corrupt(batch["tokens"].numpy(), data.vocab, 0.3, 0.3, rng)
    x, y, (q_rows, q_tokens) = basket_queries(batch["tokens"].numpy(), x, y, data.vocab, 0.5, rng)
    queried = np.zeros(len(x), dtype=bool)
    queried[q_rows] = True
    assert queried.any() and not queried.all()
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    out = model(batch, x, hidden=y != PAD)
    out.size_logits.retain_grad()
    for logits in out.aux_logits.values():
        logits.retain_grad()
    weights = LossWeights(focal=0.0, contrastive=0.0)
    loss = world_model_loss(
        model,
        out,
        batch,
        x,
        y,
        torch.zeros(len(x), dtype=torch.bool),
        weights,
        torch.Generator().manual_seed(0),
        torch.nn.Identity(),
        basket_targets=(torch.from_numpy(q_rows), torch.from_numpy(q_tokens)),
    )
    loss.total.backward()
    shown = torch.from_numpy(~queried)
    assert out.size_logits.grad[shown].abs().sum() == 0
    assert out.size_logits.grad[~shown].abs().sum() > 0
    for logits in out.aux_logits.values():
        assert logits.grad[shown].abs().sum() == 0
