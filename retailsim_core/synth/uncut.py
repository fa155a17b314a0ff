"""The planted probabilities with one product's cut removed, for many products at once.

The promotion check on synthetic data (``response/planted_events.py``) asks, for every
promoted product p of a week and every basket of the stores p's events are in, the chance the
basket holds p on the week's shelf less p's cut: ``purchase_probabilities(..., products=[p])``
inside ``oracle.cut_removed``. One call per product paid a call's overhead and a pass over
each basket's whole repertoire; here every entry is computed with the same operations in the same
order (the same bytes, tested against that loop) but:

- what does not depend on p is computed once per basket: its repertoire weights, their total,
  the repeat share and each repertoire slot's term of the mixture;
- only the pairs whose basket's repertoire holds p's slot (whose weights the removed cut
  changes) recompute their repertoire row;
- a product's exploration is rebuilt only in the regions it was cut in, and only the two slots
  read (p's and its complement partner's) are divided out.

Glossary: n pairs, B baskets, F repertoire width, U distinct products, S slots, R regions,
Fo mission foci, M price modes.
"""

from __future__ import annotations

import numpy as np

from retailsim_core.synth.demand import explore_weights, product_avail, repertoire
from retailsim_core.synth.oracle import WeekDemand


def uncut_probabilities(
    world,
    week: int,
    demand: WeekDemand,
    product: np.ndarray,
    basket: np.ndarray,
    customer: np.ndarray,
    store: np.ndarray,
    focus: np.ndarray,
    mode: np.ndarray,
    size: np.ndarray,
) -> np.ndarray:
    """(n,) the chance basket ``basket[i]`` holds catalogue product ``product[i]`` with that
    product's planted cut removed; ``customer`` .. ``size`` (B,): the baskets' planted contexts
    as indices; ``demand``: the week's (left unchanged)."""
    cat, pop = world.catalogue, world.population
    products, u = np.unique(product, return_inverse=True)  # (U,), pair -> its product
    avail, factor, explore = _uncut(world, week, demand, products)
    region = cat.store_region[store]  # (B,)
    favs, safe, weight = repertoire(world, week, customer, focus)  # (B, F) each
    pers = np.where(favs >= 0, weight * demand.factor[safe, region[:, None], mode[:, None]], 0.0)
    total = pers.sum(axis=1, keepdims=True)  # (B, 1)
    rho = np.where(total[:, 0] > 0, pop.repeat_share[customer], 0.0)
    contrib = rho[:, None] * pers / np.where(total > 0, total, 1.0)  # (B, F)
    partner, slot = cat.complement[product], cat.slot[product]
    columns = _read_slots(cat, product)  # (n, 2)
    entries = _RepertoireIndex(favs, cat.n_slots)
    # Pairs whose repertoire holds the product's slot: the removed cut changes their weights.
    hit = np.flatnonzero(entries.count(basket, columns[:, 0]) > 0)
    b, r = basket[hit], region[basket[hit]]
    values = demand.factor[safe[b], r[:, None], mode[b][:, None]]
    own = safe[b] == slot[hit][:, None]
    values[own] = np.broadcast_to(factor[u[hit], r, mode[b]][:, None], own.shape)[own]
    pers_hit = np.where(favs[b] >= 0, weight[b] * values, 0.0)  # (h, F)
    total_hit = pers_hit.sum(axis=1, keepdims=True)
    rho_hit = np.where(total_hit[:, 0] > 0, pop.repeat_share[customer[b]], 0.0)
    pair_rho = rho[basket]
    pair_rho[hit] = rho_hit
    hit_of = np.full(len(basket), -1)  # pair -> its row of the *_hit arrays
    hit_of[hit] = np.arange(len(hit))
    contrib_hit = rho_hit[:, None] * pers_hit / np.where(total_hit > 0, total_hit, 1.0)
    pr, pf, pm = region[basket], focus[basket], mode[basket]
    q = (1.0 - pair_rho)[:, None] * explore[u, pr, pf, pm]  # (n, 2)
    for c in range(2):  # each column's repertoire terms in repertoire order, as np.add.at adds
        pair, j = entries.find(basket, columns[:, c])
        mine = hit_of[pair]
        term = np.where(mine >= 0, contrib_hit[np.maximum(mine, 0), j], contrib[basket[pair], j])
        np.add.at(q[:, c], pair, term)
    lam = np.asarray(world.cfg.behaviour.extra_draws_by_size)[size[basket]]
    a_p = (1.0 - q[:, 0]) * np.exp(-lam * q[:, 0])
    share = avail[u, pr, pm] / np.maximum(factor[u, pr, pm], 1e-300)
    absent = 1.0 - (1.0 - a_p) * share
    qp, qx = q[:, 0], q[:, 1]
    a_px = (1.0 - qp - qx) * np.exp(-lam * (qp + qx))
    pull = cat.complement_prob[product] * (cat.launch_week[product] <= week)
    absent = np.where(partner >= 0, a_p - pull * (a_p - a_px), absent)
    return 1.0 - absent


def _read_slots(cat, products: np.ndarray) -> np.ndarray:
    """(n, 2) the slots a product's probability reads: its own and its complement partner's
    (its own again where it has none)."""
    partner, own = cat.complement[products], cat.slot[products]
    return np.stack([own, np.where(partner >= 0, cat.slot[np.maximum(partner, 0)], own)], 1)


class _RepertoireIndex:
    """The (basket, repertoire slot) entries sorted by basket, slot and position, to find the
    positions of given slots in given baskets' repertoires without a pass over each row."""

    def __init__(self, favs: np.ndarray, n_slots: int):
        rows, j = np.nonzero(favs >= 0)  # row-major: positions ascending within a basket
        keys = rows * n_slots + favs[rows, j]
        order = np.argsort(keys, kind="stable")
        self.keys, self.j, self.n_slots = keys[order], j[order], n_slots

    def _range(self, basket: np.ndarray, slot: np.ndarray):
        key = basket * self.n_slots + slot
        return np.searchsorted(self.keys, key, "left"), np.searchsorted(self.keys, key, "right")

    def count(self, basket: np.ndarray, slot: np.ndarray) -> np.ndarray:
        lo, hi = self._range(basket, slot)
        return hi - lo

    def find(self, basket: np.ndarray, slot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(pair, position) of every entry of slot[i] in basket[i]'s repertoire, pairs in
        order and positions ascending within a pair."""
        lo, hi = self._range(basket, slot)
        counts = hi - lo
        pair = np.repeat(np.arange(len(basket)), counts)
        first = np.cumsum(counts) - counts  # each pair's first entry in the output
        at = np.repeat(lo - first, counts) + np.arange(len(pair))
        return pair, self.j[at]


def _uncut(world, week: int, demand: WeekDemand, products: np.ndarray):
    """Per product of ``products``, what ``cut_removed`` changes: its availability row and its
    slot's totals (U, R, M), and the exploration of its slot and its partner's (U, R, Fo, M, 2)
    in every region (the regions it was cut in rebuilt, the others the week's)."""
    cat = world.catalogue
    weights = explore_weights(world, week)  # (1, Fo, M, S)
    base = weights * demand.factor.transpose(1, 2, 0)[:, None, :, :]  # (R, Fo, M, S)
    avail = demand.avail[products].copy()
    factor = demand.factor[cat.slot[products]].copy()
    slots, columns = cat.slot[products], _read_slots(cat, products)
    explore = np.moveaxis(demand.explore[:, :, :, columns], 3, 0)  # (U, R, Fo, M, 2)
    zero = np.zeros((1, demand.avail.shape[1]))
    for i, p in enumerate(products):
        regions = np.flatnonzero(world.prices.depth[week][p] != 0)
        if not len(regions):
            continue  # no cut: removing it changes nothing
        avail[i] = product_avail(world, week, zero, [p])[0]
        members = np.flatnonzero(cat.slot == slots[i])
        rows = demand.avail[members].copy()
        rows[members == p] = avail[i]
        totals = np.zeros((1,) + rows.shape[1:])
        np.add.at(totals, np.zeros(len(members), np.int64), rows)  # as cut_removed adds them
        factor[i] = totals[0]
        # explore_distribution of the regions with the slot's new totals: the same
        # multiplications (weights x factor), the row sums over every slot, then only the two
        # slots read divided out.
        w = base[regions]  # (R', Fo, M, S), a copy
        w[..., slots[i]] = weights[0, :, :, slots[i]] * totals[0][regions][:, None, :]
        explore[i][regions] = w[..., columns[i]] / w.sum(axis=-1, keepdims=True)
    return avail, factor, explore
