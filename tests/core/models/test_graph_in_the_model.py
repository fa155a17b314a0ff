"""The product graph inside the model: substitutes' price response and the substitution and
co-purchase edges a checkpoint carries."""

import torch

from retailsim_core.models.heads.products import PRODUCT_RESPONSES
from retailsim_core.training.run.model_setup import build_model
from tests.core.models.conftest import CFG, rows_with_history


def test_a_substitutes_price_cut_lowers_a_products_probability_when_the_weight_says_so(tiny):
    inputs, data, model = tiny
    batch = data[rows_with_history(data, 2)]
    edges = torch.tensor([[1, 2], [2, 1]])
    m = build_model(
        CFG, inputs.product_table, data.customer_numeric.shape[1], seed=0, substitutes=edges
    ).eval()
    with torch.no_grad():
        # product 1 loses share to 2's promotions
        m.price_response.raw_product_weights[1, PRODUCT_RESPONSES.index("substitutes_depth")] = 4.0
    shelf = batch["shelf"].clone()
    shelf[:, 2, 1] = 0.0
    with torch.no_grad():
        base = m.next_basket({**batch, "shelf": shelf})[1]
        shelf[:, 2, 1] = 0.5
        promo = m.next_basket({**batch, "shelf": shelf})[1]
    assert ((promo[:, 1] - promo[:, 3]) - (base[:, 1] - base[:, 3]) < -1.0).all()
    # products without substitutes keep their odds against each other
    torch.testing.assert_close(
        promo[:, 3] - promo[:, 4], base[:, 3] - base[:, 4], atol=1e-4, rtol=1e-4
    )


def test_substitute_edges_travel_with_the_weights(tiny, tmp_path):
    from retailsim_core.training.checkpoints import checkpoint as ckpt

    inputs, data, _ = tiny
    for edges in (torch.zeros(2, 0, dtype=torch.long), torch.tensor([[1, 2, 5], [2, 1, 7]])):
        m = build_model(
            CFG, inputs.product_table, data.customer_numeric.shape[1], seed=0, substitutes=edges
        )
        ckpt.save_tensors(tmp_path / "m.safetensors", m.state_dict())
        loaded = ckpt.load_tensors(tmp_path / "m.safetensors")
        assert torch.equal(loaded["price_response.substitute_edges"], edges)


def test_copurchase_edges_travel_with_the_weights(tiny, tmp_path):
    from retailsim_core.training.checkpoints import checkpoint as ckpt
    from retailsim_core.training.checkpoints.checkpoint import load_model

    inputs, data, _ = tiny
    assert inputs.copurchase[0].shape[1] == len(inputs.copurchase[1]) > 0
    m = build_model(
        CFG,
        inputs.product_table,
        data.customer_numeric.shape[1],
        seed=0,
        copurchase=inputs.copurchase,
    )
    loaded = ckpt.load_tensors(_save(m, tmp_path))
    assert torch.equal(loaded["copurchase.edges"], inputs.copurchase[0])
    again, _, _ = load_model(tmp_path)
    assert torch.equal(again.copurchase.matrix().to_dense(), m.copurchase.matrix().to_dense())


def _save(model, folder):
    """A checkpoint folder as ``write_checkpoint`` writes it (config, vocabulary, weights)."""
    from retailsim_core.datasets.tensors import TensorConfig
    from retailsim_core.datasets.tokens import ProductVocab
    from retailsim_core.pipeline.world_model_training import write_checkpoint
    from retailsim_core.training.run.train_config import TrainConfig

    vocab = ProductVocab(tuple(f"P{i:05d}" for i in range(model.vocab_size - 3)))
    split = {"train_end": 8, "valid_end": 11}
    write_checkpoint(
        folder, model, split, vocab, TensorConfig(), TrainConfig.preset("tiny"), {}, [], {}
    )
    return folder / "model.safetensors"
