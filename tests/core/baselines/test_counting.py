"""The counting and co-purchase baselines on literal trips: what each ranks first and why."""

from types import SimpleNamespace

import numpy as np
import scipy.sparse as sp
import torch

from retailsim_core.baselines import counting as bl

V = 6  # [PAD], products 1-3, [MASK] 4, [EOS] 5


def _order(scores: torch.Tensor) -> list[list[int]]:
    """Each row's products, best first (specials, at -inf, left out)."""
    ranked = scores.argsort(dim=1, descending=True, stable=True)
    return [
        [int(t) for t in row if s[t] > -torch.inf] for row, s in zip(ranked, scores, strict=True)
    ]


def _trips(products: list[list[int]]) -> sp.csr_matrix:
    rows = [i for i, trip in enumerate(products) for _ in trip]
    cols = [t for trip in products for t in trip]
    return sp.csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(products), V))


def test_history_weights_give_each_row_its_own_trips_by_recency():
    weights = bl.history_weights(
        np.array([0, 3]), np.array([3, 3]), 4, weight_of_position=lambda k, n: 0.5**k
    )
    np.testing.assert_array_equal(weights.toarray(), [[0.25, 0.5, 1.0, 0.0], [0.0] * 4])


def test_specials_are_never_ranked_and_ties_go_to_the_lower_token():
    scores = bl.p_topfreq(sp.csr_matrix(np.array([[0, 0, 1, 1, 0, 0]], dtype=float)))
    assert torch.isinf(scores[0, [0, 4, 5]]).all()
    assert _order(scores) == [[2, 3, 1]]


def test_gp_topfreq_breaks_personal_ties_by_popularity_and_fills_with_it():
    counts = sp.csr_matrix(np.array([[0, 0, 1, 1, 0, 0], [0] * 6], dtype=float))
    popularity = np.array([0, 5, 1, 9, 0, 0], dtype=float)
    assert _order(bl.p_topfreq(counts)) == [[2, 3, 1], [1, 2, 3]]
    assert _order(bl.gp_topfreq(counts, popularity)) == [[3, 2, 1], [3, 1, 2]]
    assert _order(bl.g_topfreq(popularity, 1)) == [[3, 1, 2]]


def _one_customer(stores: list[int], basket_store: list[int], missions=None):
    """Samples whose history is all of one customer's trips (rows 0..T-1)."""
    n, t = len(basket_store), len(stores)
    return SimpleNamespace(
        full_hist_start=np.zeros(n, dtype=np.int64),
        hist_end=np.full(n, t),
        trip_day=np.arange(t),
        trips=SimpleNamespace(store=np.array(stores)),
        basket_context=SimpleNamespace(store=np.array(basket_store)),
        trip_context=np.array(missions if missions is not None else [[0, 0]] * t),
    )


def test_store_p_topfreq_counts_the_basket_store_first():
    trips = _trips([[1], [1], [2], [2], [2]])
    data = _one_customer(stores=[7, 7, 8, 8, 8], basket_store=[7, 8, 9])
    rows = np.arange(3)
    popularity = np.array([0, 1, 2, 3, 0, 0], dtype=float)
    # at store 7 product 1 (twice there) leads product 2 (three times elsewhere); at store 9,
    # where the customer never shopped, the counts anywhere decide; product 3 last, by popularity
    assert _order(bl.store_p_topfreq(data, rows, trips, popularity)) == [
        [1, 2, 3],
        [2, 1, 3],
        [2, 1, 3],
    ]
    counts = bl.personal_counts(data, rows, trips).toarray()
    np.testing.assert_array_equal(counts[0], [0, 2, 3, 0, 0, 0])


def test_mission_p_topfreq_counts_the_trips_of_the_basket_mission_first():
    trips = _trips([[1], [2], [2]])
    data = _one_customer([0, 0, 0], [0, 0], missions=[[1, 2], [3, 1], [3, 1]])
    data.basket_labels = np.array([[1, 2, 0, 0], [1, 3, 0, 0]])  # row 1's mission was never seen
    popularity = np.zeros(V)
    assert _order(bl.mission_p_topfreq(data, np.arange(2), trips, popularity)) == [
        [1, 2, 3],
        [2, 1, 3],
    ]


def test_copurchase_is_the_share_of_trips_with_i_that_hold_j():
    co = bl.copurchase_matrix(_trips([[1, 2], [1, 3], [1]])).toarray()
    assert co[1, 2] == co[1, 3] == 1 / 3
    assert co[2, 1] == co[3, 1] == 1.0
    assert co[2, 3] == 0 and np.diag(co).sum() == 0


def test_copurchase_scores_add_the_shown_products_partners_to_personal_frequency():
    personal = sp.csr_matrix(np.array([[0, 4, 0, 2, 0, 0]], dtype=float))
    shown = sp.csr_matrix(np.array([[0, 1, 0, 0, 0, 0]], dtype=float))
    co = bl.copurchase_matrix(_trips([[1, 2], [1, 2], [1, 3]]))
    scores = bl.copurchase_scores(personal, shown, co, weight=1.0)
    # product 2: 0 + 2/3 co-purchase; product 3: 2/4 + 1/3
    assert _order(scores) == [[1, 3, 2]]
    np.testing.assert_allclose(scores[0, 1:4].numpy(), [1.0, 2 / 3, 0.5 + 1 / 3], atol=1e-6)
