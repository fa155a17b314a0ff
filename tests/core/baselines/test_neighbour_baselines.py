"""TIFU-KNN and UP-CF@r against direct per-customer computations of their papers' formulas."""

import numpy as np
import pytest
import scipy.sparse as sp

from retailsim_core.baselines import neighbour_baselines as nb

V = 7  # [PAD], products 1-4, [MASK] 5, [EOS] 6
PRODUCTS = slice(1, 5)


def _reference_tifu_weight(k: int, n: int, m: int, r_b: float, r_g: float) -> float:
    """Hu et al. (SIGIR 2020), Eq. 2-3: the n baskets grouped from the oldest in groups of m (the
    last group may be short); basket i of group j weighs r_b^(|group| - i) / |group| within it,
    group j weighs r_g^(G - j) / G."""
    groups = [list(range(n))[g : g + m] for g in range(0, n, m)]
    pos = n - 1 - k
    for j, group in enumerate(groups, start=1):
        if pos in group:
            i = group.index(pos) + 1
            within = r_b ** (len(group) - i) / len(group)
            return within * r_g ** (len(groups) - j) / len(groups)
    raise AssertionError


@pytest.mark.parametrize("n", [1, 2, 5, 7, 8])
def test_tifu_weights_are_the_papers_grouped_decay(n):
    cfg = nb.TifuConfig(group_size=3, within_decay=0.9, group_decay=0.6)
    k = np.arange(n)
    got = nb.tifu_weights(cfg)(k, np.full(n, n))
    want = [_reference_tifu_weight(int(i), n, 3, 0.9, 0.6) for i in k]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_pool_bounds_keep_each_customers_trips_before_the_day():
    data = type("Data", (), {})()
    data.trip_customer = np.array([0, 0, 0, 1, 1, 2])
    data.trip_day = np.array([1, 5, 9, 2, 8, 10])
    first, end = nb.pool_bounds(data, before_day=6)
    assert first.tolist() == [0, 3] and end.tolist() == [2, 4]  # customer 2: nothing before


OWN = np.array([[0, 3, 1, 0, 0, 0, 0], [0, 0, 0, 2, 2, 0, 0]], dtype=float)
POOL = np.array(
    [
        [0, 3, 1, 0, 0, 0, 0],  # the first row's own customer
        [0, 2, 0, 1, 0, 0, 0],
        [0, 0, 1, 2, 2, 0, 0],
        [0, 0, 0, 0, 1, 0, 0],
    ],
    dtype=float,
)
OWN_CUSTOMER, POOL_CUSTOMER = np.array([10, 11]), np.array([10, 12, 13, 14])


def _cosine(a, b):
    return a @ b / np.linalg.norm(a) / np.linalg.norm(b)


@pytest.mark.parametrize("k", [1, 2])
def test_tifu_knn_mixes_the_own_vector_with_the_k_nearest_others(k):
    cfg = nb.TifuConfig(k_neighbours=k, alpha=0.7)
    got = nb.tifu_knn(
        sp.csr_matrix(OWN), sp.csr_matrix(POOL), cfg, OWN_CUSTOMER, POOL_CUSTOMER
    ).numpy()
    for u, own in enumerate(OWN):
        others = [v for v in range(len(POOL)) if POOL_CUSTOMER[v] != OWN_CUSTOMER[u]]
        near = sorted(others, key=lambda v: -_cosine(own, POOL[v]))[:k]
        want = 0.7 * own + 0.3 * POOL[near].mean(0)
        np.testing.assert_allclose(got[u, PRODUCTS], want[PRODUCTS], atol=1e-6)
    assert np.isinf(got[:, [0, 5, 6]]).all()


def test_a_tifu_grid_is_each_configs_tifu_knn_in_order():
    """The grid shares similarities and neighbour means across k and alpha: the same scores, to
    the bit, as one ``tifu_knn`` per config (k = 9 is capped at the pool's size)."""
    configs = [nb.TifuConfig(k_neighbours=k, alpha=a) for k in (2, 1, 9) for a in (1.0, 0.7, 0.2)]
    own, pool = sp.csr_matrix(OWN), sp.csr_matrix(POOL)
    got = list(nb.tifu_knn_grid(own, pool, configs, OWN_CUSTOMER, POOL_CUSTOMER, chunk=1))
    assert [c for c, _ in got] == configs
    for c, scores in got:
        single = nb.tifu_knn(own, pool, c, OWN_CUSTOMER, POOL_CUSTOMER)
        assert scores.equal(single)
        alone = nb.TifuConfig(k_neighbours=c.k_neighbours, alpha=0.0)
        near = nb.tifu_knn(own, pool, alone, OWN_CUSTOMER, POOL_CUSTOMER)
        mixed = c.alpha * OWN[:, PRODUCTS] + (1 - c.alpha) * near.numpy()[:, PRODUCTS]
        np.testing.assert_allclose(scores.numpy()[:, PRODUCTS], mixed, atol=1e-6)


@pytest.mark.parametrize("alpha,locality,k", [(0.25, 5.0, 3), (0.75, 1.0, 1)])
def test_upcf_adds_the_neighbours_recent_popularity_weighted_by_similarity(alpha, locality, k):
    """Faggioli et al. (RecSys 2020): sum over u itself (similarity 1) and its k most similar
    others of sim(u, v)^q * p_r(v, i), sim = |I_u & I_v| / (|I_u|^alpha |I_v|^(1 - alpha))."""
    cfg = nb.UpcfConfig(alpha=alpha, locality=locality, k_neighbours=k)
    own_pop, pool_pop = OWN / 4, POOL / 4
    popularity = np.zeros(V)
    got = nb.upcf(
        sp.csr_matrix(own_pop),
        sp.csr_matrix(OWN),
        sp.csr_matrix(pool_pop),
        sp.csr_matrix(POOL),
        cfg,
        OWN_CUSTOMER,
        POOL_CUSTOMER,
        popularity,
    ).numpy()
    for u in range(len(OWN)):
        mine = OWN[u] > 0

        def sim(v, u=u, mine=mine):
            theirs = POOL[v] > 0
            if POOL_CUSTOMER[v] == OWN_CUSTOMER[u]:
                return 0.0
            return (mine & theirs).sum() / (mine.sum() ** alpha * theirs.sum() ** (1 - alpha))

        near = sorted(range(len(POOL)), key=lambda v: -sim(v))[:k]
        want = own_pop[u] + sum(sim(v) ** locality * pool_pop[v] for v in near)
        np.testing.assert_allclose(got[u, PRODUCTS], want[PRODUCTS], atol=1e-6)
