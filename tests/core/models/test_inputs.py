"""Layer 0: price encoding, product fusion (masking traps), context fusion, shared vocabulary."""

import polars as pl
import torch

from retailsim_core.datasets.tokens import PAD, ProductVocab
from retailsim_core.models.inputs import (
    ContextFusion,
    FourierPriceEncoder,
    InputConfig,
    ProductFusion,
    graphsage_rows,
    vocab_rows_of,
)

CFG = InputConfig(d_model=32, product_dim=8, max_len=16)
VOCAB = ProductVocab(tuple(f"PRD{i:07d}" for i in range(10)))


def _table():
    vectors = torch.randn(10, 8, generator=torch.Generator().manual_seed(0))
    id_map = pl.DataFrame(
        {"row": list(range(10)), "product_id": list(reversed(VOCAB.products))}
    )  # another order
    return graphsage_rows(VOCAB, vectors, id_map), vectors, id_map


def test_vocabulary_maps_known_products_end_to_end():
    table, vectors, id_map = _table()
    for product in ("PRD0000000", "PRD0000004", "PRD0000009"):
        token = vocab_rows_of(VOCAB, [product])[0]
        row = id_map.filter(pl.col("product_id") == product)["row"][0]
        torch.testing.assert_close(table[token], vectors[row] / vectors[row].norm())
    assert table[PAD].abs().sum() == 0 and table.shape == (VOCAB.size, 8)


def test_price_encoder_is_64_wide_with_learned_frequencies():
    enc = FourierPriceEncoder()
    out = enc(torch.rand(2, 5, 9))
    assert out.shape == (2, 5, 64)
    out.sum().backward()
    assert enc.frequencies.grad is not None and enc.frequencies.grad.abs().sum() > 0


def test_masked_positions_never_see_the_true_product_or_its_price():
    table, _, _ = _table()
    fusion = ProductFusion(CFG, table)
    context = torch.randn(1, 32)
    tokens = torch.tensor([[3, VOCAB.mask, 5, VOCAB.eos, PAD]])
    hidden = torch.tensor([[False, True, False, False, False]])
    prices_a, prices_b = torch.rand(1, 5, 9), torch.rand(1, 5, 9)
    prices_b[0, [0, 2, 3, 4]] = prices_a[0, [0, 2, 3, 4]]  # only the hidden position differs
    out_a = fusion(tokens, prices_a, context, hidden)
    out_b = fusion(tokens, prices_b, context, hidden)
    assert torch.equal(out_a, out_b)  # its price cannot leak
    # A random-product corruption is hidden the same way: the price of the true product is gone.
    swapped = tokens.clone()
    swapped[0, 1] = 7
    assert torch.equal(
        fusion(swapped, prices_a, context, hidden), fusion(swapped, prices_b, context, hidden)
    )


def test_pad_is_zero_and_gets_no_gradient():
    table, _, _ = _table()
    fusion = ProductFusion(CFG, table)
    tokens = torch.tensor([[3, 4, VOCAB.eos, PAD, PAD]])
    out = fusion(tokens, torch.rand(1, 5, 9), torch.randn(1, 32))
    assert out.shape == (1, 6, 32)
    assert torch.equal(out[0, 4:], torch.zeros(2, 32))  # PAD positions (after the context token)
    out.sum().backward()
    assert fusion.products.weight.grad[PAD].abs().sum() == 0


def test_context_fusion_blends_segments_by_alpha():
    fusion = ContextFusion(CFG, n_customer_numeric=22, history_dim=16, n_stores=100)
    b = 3
    batch = {
        "customer_codes": torch.tensor([[1, 2], [0, 0], [4, 7]]),
        "customer_numeric": torch.rand(b, 22),
        "history_alpha": torch.tensor([0.8, 0.2, 0.5]),
        "calendar": torch.tensor(
            [[14, 2, 9, 0, 1, 0.1, 3.0], [52, 1, 0, 1, 0, 0.9, -1.0], [1, 7, 21, 0, 3, 0.5, 40.0]]
        ),
        "store_codes": torch.tensor([[1, 3, 5], [4, 12, 0], [2, 1, 99]]),
        "store_numeric": torch.rand(b, 4),
        "basket_labels": torch.tensor([[1, 2, 3, 1], [4, 5, 4, 3], [0, 0, 0, 0]]),
    }
    out = fusion(batch, torch.randn(b, 16))
    assert out.shape == (b, 32) and torch.isfinite(out).all()
