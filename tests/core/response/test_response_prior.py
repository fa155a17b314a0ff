"""The responses' empirical-Bayes start: training-week rate ratios per product, shrunk toward
the category's and the category's toward the overall one (gamma-Poisson), floored at the
response's sign, set exactly on the price response; the own-depth response a shrunk Poisson
log-log slope per unit of depth."""

import numpy as np
import polars as pl
import pytest
import torch
import torch.nn.functional as F
from scipy.optimize import minimize_scalar

from retailsim_core.ingest.promotion_plan import SOURCE_PROMOTIONS_SCHEMA
from retailsim_core.models.heads.products import PRODUCT_RESPONSES, PriceResponse
from retailsim_core.response import response_prior
from retailsim_core.response.promotion_events import PROMOTIONS_SCHEMA
from retailsim_core.response.response_prior import (
    FLOOR,
    PSEUDO_UNITS,
    depth_responses,
    plan_lifts,
    start_depth_responses,
    start_plan_responses,
)
from retailsim_core.response.shrunk_poisson import DEFAULT_VARIANCE

VOCAB = pl.DataFrame({"product_id": ["A", "B", "C"], "token": [1, 2, 3]})
CATEGORIES = np.array([0, 1, 1, 2])  # PAD, then A and B share a category, C its own


def _world():
    """One store, weeks 1-8: A sells 1 a week, 4 in its displayed weeks 3 and 6; B sells 2 a
    week, in the mailer in week 4 with no change; C is never promoted."""
    rows, basket = [], 0
    for week in range(1, 9):
        a = 4 if week in (3, 6) else 1
        for i in range(max(a, 2)):
            basket += 1
            products = (["A"] if i < a else []) + (["B"] if i < 2 else []) + ["C"]
            rows.append((basket, "S1", week, products))
    trips = pl.DataFrame(rows, schema=["basket_id", "store_id", "week", "products"], orient="row")
    plan = pl.DataFrame(
        [
            (3, "A", "S1", True, False, "1", "0", 1),
            (6, "A", "S1", True, False, "1", "0", 1),
            (4, "B", "S1", False, True, "0", "A", 1),
        ],
        schema=SOURCE_PROMOTIONS_SCHEMA,
        orient="row",
    )
    return trips, plan


def test_lifts_are_shrunk_rate_ratios_and_unpromoted_products_take_their_categorys():
    trips, plan = _world()
    lifts = plan_lifts(trips, plan, VOCAB, CATEGORIES)
    display, mailer = lifts[:, 0], lifts[:, 1]
    m = PSEUDO_UNITS
    # display: A sold 8 in its 2 displayed weeks against 2 expected at its unpromoted rate
    overall = (8 + m) / (2 + m)
    category = (8 + m * overall) / (2 + m)
    assert display[1] == pytest.approx(np.log((8 + m * category) / (2 + m)))
    assert display[2] == pytest.approx(np.log(category))  # B: never displayed, its category's
    assert display[3] == pytest.approx(np.log(overall))  # C: a category never displayed
    # mailer: B sold 2 against 2 expected, a rate ratio of 1 whatever the shrinkage
    assert mailer[2] == pytest.approx(0.0)


def test_lifts_from_a_panel_built_a_group_of_products_at_a_time_equal_one_panel(monkeypatch):
    """``plan_lifts`` reads the panel a group of products at a time (``PRIOR_GROUP_CELLS``
    cells): one product a group gives the lifts of one whole panel, from a frame or a scan."""
    trips, plan = _world()
    whole = plan_lifts(trips, plan, VOCAB, CATEGORIES)
    monkeypatch.setattr(response_prior, "PRIOR_GROUP_CELLS", 1)
    np.testing.assert_allclose(plan_lifts(trips.lazy(), plan, VOCAB, CATEGORIES), whole)


def test_no_promoted_sale_gives_no_start():
    trips, plan = _world()
    assert plan_lifts(trips, plan.filter(pl.col("product_id") == "Z"), VOCAB, CATEGORIES) is None


def test_the_start_is_set_exactly_and_pooled_by_category():
    pr = PriceResponse(2, 4, torch.zeros(2, 0, dtype=torch.long), torch.from_numpy(CATEGORIES))
    lifts = np.array([[0.0, 0.0], [0.6, 0.2], [0.2, -0.3], [0.4, 0.1]])
    start_plan_responses(pr, lifts)
    columns = [PRODUCT_RESPONSES.index("display"), PRODUCT_RESPONSES.index("mailer")]
    got = pr.product_weights[:, columns].detach()
    torch.testing.assert_close(
        got, torch.from_numpy(np.maximum(lifts, FLOOR)).float(), atol=1e-4, rtol=1e-4
    )
    # the category of A and B holds their median; the own-depth responses are untouched
    raw_ab = pr.raw_category_weights[1, 0]  # the display column of the pooled responses
    assert float(F.softplus(raw_ab)) > 0.2 and float(F.softplus(raw_ab)) < 0.6
    assert (pr.raw_product_weights[:, 0] == 0).all()


def _cuts(rows):
    return pl.DataFrame(
        [(p, "S1", w, "price", d) for p, w, d in rows], schema=PROMOTIONS_SCHEMA, orient="row"
    ).lazy()


def test_depth_responses_are_shrunk_poisson_slopes_per_unit_of_depth():
    trips, _ = _world()
    # A cut by 0.5 in weeks 3 and 6 (where it sold 4 against 1); B cut by 0.2 in week 4 (2
    # against 2): too few products to measure a spread, so tau^2 = 1 at both levels (D94).
    own = depth_responses(
        trips, _cuts([("A", 3, 0.5), ("A", 6, 0.5), ("B", 4, 0.2)]), VOCAB, CATEGORIES
    )
    xa, xb = -np.log(0.5), -np.log(0.8)
    y, e, x = np.array([4.0, 4.0, 2.0]), np.array([1.0, 1.0, 2.0]), np.array([xa, xa, xb])

    def mode(m, prior, precision):  # oracle: the penalised log-likelihood's maximum
        def loss(b):
            return (
                -(y[m] * b * x[m] - e[m] * np.exp(b * x[m])).sum()
                + precision / 2 * (b - prior) ** 2
            )

        return minimize_scalar(loss).x

    every = np.ones(3, dtype=bool)
    overall = mode(every, 0.0, 0.0)
    category = mode(every, overall, 1 / DEFAULT_VARIANCE)  # A and B share category 1
    a = mode(np.array([True, True, False]), category, 1 / DEFAULT_VARIANCE)
    b = mode(np.array([False, False, True]), category, 1 / DEFAULT_VARIANCE)
    assert own[1] == pytest.approx(a * xa / 0.5, abs=1e-5)  # per unit of depth
    assert own[2] == pytest.approx(b * xb / 0.2, abs=1e-5)
    per_depth = x.sum() / np.array([0.5, 0.5, 0.2]).sum()
    assert own[3] == pytest.approx(overall * per_depth, abs=1e-5)  # C: never cut, overall
    # B sold no more when cut: shrunk toward its category, it still responds less than A
    assert own[1] > own[2] > 0


def test_a_cut_of_depth_zero_is_no_cut():
    trips, _ = _world()
    assert depth_responses(trips, _cuts([("A", 3, 0.0)]), VOCAB, CATEGORIES) is None


def test_the_depth_start_is_set_exactly_and_leaves_the_plan_responses():
    pr = PriceResponse(2, 4, torch.zeros(2, 0, dtype=torch.long), torch.from_numpy(CATEGORIES))
    before = pr.raw_category_weights.detach().clone()
    own = np.array([0.0, 2.5, -1.0, 0.3])
    start_depth_responses(pr, own)
    got = pr.product_weights[:, PRODUCT_RESPONSES.index("discount_depth")].detach()
    torch.testing.assert_close(got, torch.tensor([FLOOR, 2.5, FLOOR, 0.3]), atol=1e-5, rtol=1e-5)
    assert torch.equal(pr.raw_category_weights.detach(), before)
    assert (
        pr.raw_product_weights[:, 1:]
        == PriceResponse(
            2, 4, torch.zeros(2, 0, dtype=torch.long), torch.from_numpy(CATEGORIES)
        ).raw_product_weights[:, 1:]
    ).all()


def test_depth_responses_in_product_groups_equal_one_panel(monkeypatch):
    """D97: the panel built a group of products at a time gives the same responses, bit for bit,
    as one panel of every product (a product x store is never split across groups)."""
    rng = np.random.default_rng(3)
    products = [f"P{i:02d}" for i in range(12)]
    vocab = pl.DataFrame({"product_id": products, "token": range(1, 13)})
    rows = [
        (b, f"S{rng.integers(3)}", int(rng.integers(1, 9)), list(rng.choice(products, 3, False)))
        for b in range(600)
    ]
    trips = pl.DataFrame(rows, schema=["basket_id", "store_id", "week", "products"], orient="row")
    cuts = _cuts(
        [(p, int(w), float(rng.uniform(0.05, 0.5))) for p in products[:9] for w in (2, 5)]
    ).with_columns(store_id=pl.lit("S1"))
    categories = np.array([0] + [1 + i % 3 for i in range(12)])
    whole = depth_responses(trips, cuts, vocab, categories)
    monkeypatch.setattr(response_prior, "PRIOR_GROUP_CELLS", 7)  # many groups
    np.testing.assert_array_equal(depth_responses(trips, cuts, vocab, categories), whole)
