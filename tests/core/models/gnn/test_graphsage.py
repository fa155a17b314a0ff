"""GraphSAGE: shapes, determinism, gradients, and what the embeddings learn on planted truth."""

from functools import partial

import polars as pl
import pytest
import torch

from retailsim_core.graph.product_embeddings import train_embeddings
from retailsim_core.models.determinism import deterministic_kernels
from retailsim_core.models.gnn.graphsage import (
    RELATIONS,
    GraphSAGEConfig,
    NodeIds,
    ProductGraphSAGE,
    model_graph,
    train,
)
from retailsim_core.pipeline.data.embeddings import all_products, load_embeddings, write_embeddings
from retailsim_core.pipeline.data.feature_weeks import build_pseudo_brands
from retailsim_core.split import TemporalSplit

SMALL = GraphSAGEConfig(epochs=3)


def _toy():
    n = 6  # products 0-3, categories 4-5
    ids = NodeIds(
        sku=torch.tensor([1, 2, 3, 4, 0, 0]),
        brand=torch.tensor([1, 1, 2, 2, 0, 0]),
        category=torch.tensor([0, 0, 1, 1, 0, 1]),
        tier=torch.tensor([0, 1, 2, 1, 3, 3]),
    )

    def e(s, d, w):
        return (torch.tensor(s), torch.tensor(d), torch.tensor(w, dtype=torch.float32))

    edges = {
        "copurchase": e([0, 1], [2, 3], [2.0, 3.0]),
        "substitution": e([0], [1], [0.7]),
        "hierarchy": e([0, 1, 2, 3], [4, 4, 5, 5], [1.0, 1.0, 1.0, 1.0]),
    }
    return ids, edges, model_graph(edges, n), (4, 2, 2)


def test_output_shape_and_gradient_to_every_layer():
    ids, edges, graphs, sizes = _toy()
    model = ProductGraphSAGE(SMALL, *sizes)
    z = model(graphs, ids)
    assert z.shape == (6, 256) and model.encoder(ids).shape == (6, 144)
    from retailsim_core.models.gnn.graphsage import link_prediction_loss

    link_prediction_loss(model, z, edges, SMALL, torch.Generator().manual_seed(0)).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_same_seed_same_model():
    ids, edges, graphs, sizes = _toy()
    (m1, l1), (m2, l2) = (train(graphs, ids, edges, sizes, SMALL) for _ in range(2))
    assert l1 == l2
    assert torch.equal(m1(graphs, ids), m2(graphs, ids))
    m3, _ = train(graphs, ids, edges, sizes, GraphSAGEConfig(epochs=3, seed=1))
    assert not torch.equal(m1(graphs, ids), m3(graphs, ids))


def test_training_runs_with_deterministic_kernels_and_restores_the_setting():
    """Thread-order-dependent CPU kernels made the default data's embeddings differ on every run
    (losses split at epoch 4); training now runs with PyTorch's deterministic implementations."""
    ids, edges, graphs, sizes = _toy()
    seen = []
    assert not torch.are_deterministic_algorithms_enabled()
    train(
        graphs,
        ids,
        edges,
        sizes,
        SMALL,
        progress=lambda *_: seen.append(torch.are_deterministic_algorithms_enabled()),
    )
    assert seen == [True] * SMALL.epochs and not torch.are_deterministic_algorithms_enabled()
    with pytest.raises(ZeroDivisionError):
        train(graphs, ids, edges, sizes, SMALL, progress=lambda *_: 1 / 0)
    assert not torch.are_deterministic_algorithms_enabled()


def test_no_kernel_reads_memory_it_did_not_write(monkeypatch):
    """Deterministic mode's NaN fill of new tensors is off inside ``deterministic_kernels`` (and
    restored after): the same bytes with the fill on prove no kernel of training read memory
    it had not written (a NaN read would have spread into the weights or the losses)."""
    ids, edges, graphs, sizes = _toy()
    fill = torch.utils.deterministic
    assert fill.fill_uninitialized_memory
    seen = []
    fast = train(
        graphs, ids, edges, sizes, SMALL, lambda *_: seen.append(fill.fill_uninitialized_memory)
    )
    assert seen == [False] * SMALL.epochs and fill.fill_uninitialized_memory
    filling = partial(deterministic_kernels, fill=True)
    monkeypatch.setattr("retailsim_core.models.gnn.graphsage.deterministic_kernels", filling)
    seen.clear()
    slow = train(
        graphs, ids, edges, sizes, SMALL, lambda *_: seen.append(fill.fill_uninitialized_memory)
    )
    assert seen == [True] * SMALL.epochs
    assert fast[1] == slow[1]
    slow_weights = slow[0].state_dict()
    for name, weights in fast[0].state_dict().items():
        assert torch.equal(weights, slow_weights[name]), name


@pytest.mark.parametrize("threads", [1, 2])
def test_score_equals_the_advanced_index_forward_and_backward_bit_for_bit(threads):
    """The score gathers rows with ``index_select``; the reference is ``unit[src]``. Repeated
    nodes (every negative's source is a positive's, many destinations recur) make the backward a
    sum per node whose order must be the reference's for the model to stay the same bytes."""
    gen = torch.Generator().manual_seed(3)
    unit = torch.nn.functional.normalize(torch.randn(50, 256, generator=gen), dim=-1)
    src = torch.randint(0, 50, (400,), generator=gen).repeat(5)
    dst = torch.randint(0, 50, (2_000,), generator=gen)
    weight = torch.randn(2_000, generator=gen)
    model = ProductGraphSAGE(SMALL, 4, 2, 2)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with deterministic_kernels():
            grads = []
            for score in (
                model.score,
                lambda u, r, s, d: (u[s] * u[d]).sum(-1) / model.temperature + model.bias[r],
            ):
                leaf = unit.clone().requires_grad_()
                out = score(leaf, 1, src, dst)
                (out * weight).sum().backward()
                grads.append((out.detach(), leaf.grad))
    finally:
        torch.set_num_threads(before)
    (out, grad), (ref_out, ref_grad) = grads
    assert torch.equal(out, ref_out) and torch.equal(grad, ref_grad)
    assert grad.abs().sum() > 0


def test_relations_are_aggregated_separately():
    """Layer 1 sees [x | mean_cop | mean_sub | mean_hier]: changing one relation's weights moves
    it.
    """
    ids, edges, graphs, sizes = _toy()
    model = ProductGraphSAGE(SMALL, *sizes)
    x = model.encoder(ids)
    before = model.layer1(graphs, x)
    graphs[RELATIONS.index("copurchase")].edata["weight"] *= 3
    after = model.layer1(graphs, x)
    assert not torch.allclose(before[0], after[0]) and torch.allclose(
        before[4], after[4]
    )  # node 4 has no co-purchase


@pytest.fixture(scope="module")
def trained(default_pipeline):
    wh = default_pipeline["warehouse"]
    brands = build_pseudo_brands(wh, TemporalSplit())
    emb = train_embeddings(default_pipeline["graph"], brands, all_products(wh))
    write_embeddings(wh, emb, GraphSAGEConfig())
    return emb


def _cosine(emb, a: pl.Series, b: pl.Series) -> torch.Tensor:
    unit = torch.nn.functional.normalize(emb.vectors, dim=1)
    rows = dict(zip(emb.id_map["product_id"], emb.id_map["row"], strict=True))
    ia, ib = torch.tensor([rows[x] for x in a]), torch.tensor([rows[x] for x in b])
    return (unit[ia] * unit[ib]).sum(1)


@pytest.mark.slow
def test_planted_pairs_are_closer_than_random_pairs(trained, default_pipeline):
    truth, m = default_pipeline["truth"], trained.id_map
    subs = pl.read_parquet(truth / "substitute_pairs.parquet")
    comps = pl.read_parquet(truth / "complement_pairs.parquet")
    same = (
        m.join(m, on="prod_code_10", suffix="_b")
        .filter(pl.col("product_id") != pl.col("product_id_b"))
        .sample(3000, seed=0)
    )
    a, b = (
        m.sample(4000, seed=1, with_replacement=True),
        m.sample(4000, seed=2, with_replacement=True),
    )
    cross = pl.DataFrame({"a": a["product_id"], "b": b["product_id"]}).filter(
        a["prod_code_10"] != b["prod_code_10"]
    )
    sub_margin = (
        _cosine(trained, subs["product_a"], subs["product_b"]).mean()
        - _cosine(trained, same["product_id"], same["product_id_b"]).mean()
    )
    comp_margin = (
        _cosine(trained, comps["product_a"], comps["product_b"]).mean()
        - _cosine(trained, cross["a"], cross["b"]).mean()
    )
    print(
        f"cosine margin: substitutes vs same-category {sub_margin:.3f}; complements vs "
        f"cross-category {comp_margin:.3f}"
    )
    assert sub_margin > 0.05 and comp_margin > 0.3


def test_embeddings_round_trip_and_novel_products(trained, default_pipeline):
    vectors, id_map = load_embeddings(default_pipeline["warehouse"])
    assert torch.equal(vectors, trained.vectors) and vectors.shape[1] == 256
    novel = id_map.filter(pl.col("source") != "graph")
    assert novel.height > 0 and set(novel["source"]) <= {"sub_commodity_mean", "global_mean"}
    row = novel.filter(pl.col("source") == "sub_commodity_mean").row(0, named=True)
    peers = id_map.filter(
        (pl.col("prod_code_10") == row["prod_code_10"]) & (pl.col("source") == "graph")
    )["row"]
    assert torch.allclose(
        vectors[row["row"]], vectors[torch.tensor(peers.to_numpy())].mean(0), atol=1e-6
    )


def test_the_vocabulary_holds_no_product_first_sold_in_a_test_week(tiny_warehouse):
    """Defect 5 of issue #17: products first sold after the validation weeks are in no method's
    vocabulary (and get no embedding row): a model deployed at the test start cannot know them."""
    import polars as pl

    from retailsim_core.ingest.lgsr import RAW_TRANSACTIONS_SCHEMA
    from retailsim_core.pipeline.data.embeddings import all_products
    from retailsim_core.pipeline.data.ingest_weeks import RAW_TABLE

    wh, valid_end = tiny_warehouse["warehouse"], tiny_warehouse["split"].valid_end
    first = (
        wh.scan(RAW_TABLE, schema=RAW_TRANSACTIONS_SCHEMA)
        .group_by("product_id")
        .agg(pl.col("week").min())
        .collect()
    )
    late = set(first.filter(pl.col("week") > valid_end)["product_id"])
    known = set(all_products(wh, max_week=valid_end)["product_id"])
    assert late and not (late & known)
    assert known == set(first.filter(pl.col("week") <= valid_end)["product_id"])
