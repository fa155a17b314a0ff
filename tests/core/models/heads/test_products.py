"""Heads, losses and corruption on literal tensors: focal loss, the repeat/explore mixture,
substitute and mission features, the price and co-purchase responses, masking and queries."""

import math

import numpy as np
import torch

from retailsim_core.datasets.tokens import PAD
from retailsim_core.models.heads.products import (
    NEG,
    PRODUCT_RESPONSES,
    PriceResponse,
    mixture_log_probs,
)
from retailsim_core.models.losses import focal_loss
from retailsim_core.training.run.corruption import basket_queries, suffix_mask


def test_focal_loss_matches_hand_computation():
    logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    p0 = math.exp(2) / (math.exp(2) + 2)
    p1 = math.e / (math.e + 2)
    expected = [-((1 - p0) ** 2) * math.log(p0), -((1 - p1) ** 2) * math.log(p1)]
    log_p = torch.log_softmax(logits, -1)[[0, 1], [0, 1]]
    torch.testing.assert_close(focal_loss(log_p), torch.tensor(expected))
    torch.testing.assert_close(focal_loss(log_p, gamma=0.0), -log_p)


def test_mixture_is_repeat_share_times_repeat_plus_the_rest_times_explore():
    explore = torch.tensor([[0.0, 1.0, 2.0, 0.5, 0.0], [0.0, 1.0, 2.0, 0.5, 0.0]])  # (M=2, V=5)
    excluded = torch.zeros(2, 5, dtype=torch.bool)
    excluded[:, 0] = True  # [PAD]
    excluded[0, 2] = True  # shown in basket 0
    repeat = torch.tensor([[3.0, 1.0, 0.0], [3.0, 1.0, 0.0]])
    products = torch.tensor([[2, 3, PAD], [PAD, PAD, PAD]])  # row 1: no history
    share = torch.tensor([0.4, 2.0])
    got = mixture_log_probs(explore, repeat, products, share, excluded)
    pi = torch.sigmoid(torch.tensor(0.4))
    p_exp = torch.softmax(torch.tensor([1.0, 0.5, 0.0]), 0)  # tokens 1, 3, 4 (2 shown)
    want0 = torch.tensor(
        [0.0, (1 - pi) * p_exp[0], 0.0, (1 - pi) * p_exp[1] + pi * 1.0, (1 - pi) * p_exp[2]]
    )
    torch.testing.assert_close(got[0, 1:].exp(), want0[1:])  # 3 is the only allowed repeat
    assert got[0, 0] == NEG and got[0, 2] == NEG
    torch.testing.assert_close(
        got[1, 1:].exp(), torch.softmax(explore[1, 1:], 0)
    )  # no history: explore only
    leaf = explore.clone().requires_grad_()
    mixture_log_probs(leaf, repeat, products, share, excluded)[:, 1:].sum().backward()
    assert torch.isfinite(leaf.grad).all()


def test_substitute_counts_and_given_mission_features():
    from retailsim_core.datasets.history_features import (
        FOCUS_COLUMNS,
        HISTORY_FEATURES,
        TYPE_COLUMNS,
    )
    from retailsim_core.models.heads.products import mission_features, substitute_counts

    values = torch.zeros(1, 3, len(HISTORY_FEATURES))
    values[0, :, 0] = torch.log1p(torch.tensor([2.0, 5.0, 1.0]))  # log counts of tokens 1, 2, 4
    values[0, 1, TYPE_COLUMNS[2]] = 7.0  # Full Shop count of token 2
    values[0, 1, FOCUS_COLUMNS[0]] = 3.0  # Fresh count of token 2
    products = torch.tensor([[1, 2, 4]])
    edges = torch.tensor([[1, 2, 3], [2, 1, 4]])  # 1 <-> 2, 3 -> 4
    got = substitute_counts(values, products, edges, vocab_size=6)[0, :, 0]
    torch.testing.assert_close(got, torch.log1p(torch.tensor([5.0, 2.0, 0.0])))  # 3 never bought
    basket_labels = torch.tensor([[3, 1, 2, 2]])  # Full Shop, Fresh
    torch.testing.assert_close(
        mission_features(values, basket_labels)[0, 1], torch.tensor([7.0, 3.0])
    )
    assert (
        mission_features(values, torch.zeros_like(basket_labels)).abs().sum() == 0
    )  # none given: 0


def test_suffix_masking_is_one_generation_step_never_an_eos():
    tokens = np.array([[3, 4, 9, 0], [5, 9, 0, 0]])  # 9 = [EOS] of an 7-product vocabulary
    from retailsim_core.datasets.tokens import ProductVocab

    vocab = ProductVocab(tuple(f"P{i}" for i in range(7)))
    for seed in range(20):
        x, y = suffix_mask(tokens, vocab, np.random.default_rng(seed))
        for xi, yi, ti in zip(x, y, tokens, strict=True):
            cut = int(np.flatnonzero(xi == vocab.mask)[0])
            assert (xi[:cut] == ti[:cut]).all() and (xi[cut + 1 :] == PAD).all()
            assert yi[cut] == ti[cut] != vocab.eos and (np.delete(yi, cut) == PAD).all()


def test_item_shuffling_permutes_products_with_their_prices_only():
    from retailsim_core.datasets.tokens import ProductVocab
    from retailsim_core.training.run.corruption import shuffle_items

    vocab = ProductVocab(tuple(f"P{i}" for i in range(7)))
    tokens = np.array([[3, 4, 5, 9, 0], [6, 9, 0, 0, 0]])  # 9 = [EOS]
    prices = tokens[..., None].astype(np.float32) * np.ones((1, 1, 9), dtype=np.float32)
    seen = set()
    for seed in range(20):
        t, p = shuffle_items(tokens, prices, vocab, np.random.default_rng(seed))
        assert (
            sorted(t[0, :3]) == [3, 4, 5]
            and list(t[0, 3:]) == [9, 0]
            and list(t[1]) == [6, 9, 0, 0, 0]
        )
        assert (p[..., 0] == t).all()  # each price follows its product
        seen.add(tuple(t[0, :3]))
    assert len(seen) > 3


def test_basket_queries_ask_one_slot_for_every_product():
    from retailsim_core.datasets.tokens import ProductVocab

    vocab = ProductVocab(tuple(f"P{i}" for i in range(7)))
    tokens = np.array([[3, 4, 5, 9, 0], [6, 9, 0, 0, 0]])  # 9 = [EOS]
    x, y, (rows, targets) = basket_queries(
        tokens, tokens.copy(), np.zeros_like(tokens), vocab, 1.0, np.random.default_rng(0)
    )
    assert (x[:, 0] == vocab.mask).all() and (x[:, 1:] == PAD).all() and (y == PAD).all()
    assert list(zip(rows.tolist(), targets.tolist(), strict=True)) == [
        (0, 3),
        (0, 4),
        (0, 5),
        (1, 6),
    ]  # never [EOS]
    x0, _, (r0, _) = basket_queries(
        tokens, tokens.copy(), np.zeros_like(tokens), vocab, 0.0, np.random.default_rng(0)
    )
    assert (x0 == tokens).all() and len(r0) == 0


def test_price_response_matches_hand_computation_with_substitutes():
    # Vocabulary of 4 tokens; products 1 and 2 are substitutes (both directions), 3 has none.
    # Shelf: log_rel, depth, promo, available, display, mailer.
    pr = PriceResponse(d_model=2, vocab_size=4, substitutes=torch.tensor([[1, 2], [2, 1]]))
    shelf = torch.tensor(
        [
            [
                [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                [-0.2, 0.2, 1.0, 1.0, 1.0, 0.0],
                [0.1, 0.5, 1.0, 1.0, 0.0, 1.0],
                [0.3, 0.0, 0.0, 1.0, 0.0, 0.0],
            ]
        ]
    )
    feats = pr.features(shelf)  # log_rel, available, depth, substitutes' depth, display, mailer
    torch.testing.assert_close(feats[0, 1], torch.tensor([-0.2, 1.0, 0.2, 0.5, 1.0, 0.0]))
    torch.testing.assert_close(feats[0, 2], torch.tensor([0.1, 1.0, 0.5, 0.2, 0.0, 1.0]))
    torch.testing.assert_close(feats[0, 3], torch.tensor([0.3, 1.0, 0.0, 0.0, 0.0, 0.0]))
    inverse_softplus = torch.tensor([2.0, 3.0, 0.7, 0.4]).expm1().log()
    with torch.no_grad():
        pr.raw_category_weights[:] = 0.0
        pr.raw_product_weights[1] = inverse_softplus  # a = (2, -3, 0.7, 0.4)
        pr.context_weights.bias[:] = torch.tensor([0.5, 0.1])  # log relative price, available
        pr.scale.bias[:] = math.log(2.0)
    got = pr(torch.zeros(1, 2), feats, torch.tensor([0]))[:, [1, 3]]  # products 1, 3 of row 0
    # product 1: 0.5 * -0.2 + 0.1 * 1 + 2 * (2 * 0.2 - 3 * 0.5 + 0.7 * 1)
    # product 3: 0.5 * 0.3 + 0.1 * 1 + 2 * (softplus(0) * 0 ...) = 0.25
    torch.testing.assert_close(
        got, torch.tensor([[0.5 * -0.2 + 0.1 + 2 * (0.4 - 1.5 + 0.7), 0.15 + 0.1]])
    )


def test_a_rare_product_starts_at_and_moves_with_its_categorys_response():
    categories = torch.tensor([0, 1, 1, 2])
    pr = PriceResponse(2, 4, torch.zeros(2, 0, dtype=torch.long), categories)
    assert pr.raw_category_weights.shape == (3, 2)  # display, mailer
    torch.testing.assert_close(pr.product_weights[1], pr.product_weights[2])
    with torch.no_grad():
        pr.raw_category_weights[1, 0] = 2.0  # display
    a = pr.product_weights[:, PRODUCT_RESPONSES.index("display")]
    assert a[1] == a[2] and a[1] > a[3]  # both products of category 1 moved, category 2 did not
    assert (pr.product_weights[:, 1] <= 0).all() and (pr.product_weights[:, [0, 2, 3]] >= 0).all()


def test_copurchase_response_is_the_mean_log_lift_from_the_shown_products():
    from retailsim_core.models.heads.products import CopurchaseResponse

    # edges 1 -> 3 (lift e), 2 -> 3 (lift e^3), 1 -> 4 (lift e^2); 5 vocabulary tokens
    cop = CopurchaseResponse(
        d_model=2,
        vocab_size=5,
        edges=torch.tensor([[1, 2, 1], [3, 3, 4]]),
        lift=torch.tensor([math.e, math.e**3, math.e**2]),
    )
    with torch.no_grad():
        cop.weight.bias[:] = 2.0
    shown = torch.tensor([[False, True, True, False, False], [False] * 5])
    got = cop(torch.zeros(2, 2), shown)
    # row 0: shown {1, 2}: token 3 gets (1 + 3) / 2, token 4 gets 2 / 2; times the weight 2
    torch.testing.assert_close(got[0], torch.tensor([0.0, 0.0, 0.0, 4.0, 2.0]))
    assert got[1].abs().sum() == 0  # nothing shown, no offset


def test_replacing_cells_equals_the_features_of_the_changed_shelf():
    """The events check's fast path: a few cells of the shelf changed, the features recomputed
    for them and the substitutes they feed only."""
    from retailsim_core.datasets.shelf import SHELF_FEATURES

    gen = torch.Generator().manual_seed(5)
    b, v, s = 4, 9, len(SHELF_FEATURES)
    edges = torch.tensor([[1, 2, 3, 3, 5, 7], [2, 1, 4, 5, 3, 8]])  # src -> dst, 5 feeds 3
    pr = PriceResponse(d_model=2, vocab_size=v, substitutes=edges)
    shelf = torch.rand(b, v, s, generator=gen)
    rows, cols = torch.tensor([0, 0, 2, 3]), torch.tensor([3, 5, 1, 3])
    cells = torch.rand(4, s, generator=gen)
    changed = shelf.clone()
    changed[rows, cols] = cells
    fast = pr.replace_cells(pr.features(shelf), shelf, rows, cols, cells)
    torch.testing.assert_close(fast, pr.features(changed))
    assert not torch.equal(pr.features(shelf)[0, 4], fast[0, 4])  # 3's substitute moved
