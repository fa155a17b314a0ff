"""The promotion events against the generator's planted demand (synthetic data; issue #36).

The observed lift of an event is one noisy draw; on synthetic data the truth is known. For each
event (product p, store, week w) the generator's exact probability that each of the
store-week's evaluated baskets holds p (``synth.oracle``, from the basket's planted customer,
mission and size) is summed twice: with the week's planted cuts, and with p's cut removed (its
region's depth 0; the rest of the shelf as it was). The same ``response_metrics`` then score
every method's two predictions against these planted units and lifts: the check without the
observation's noise, and the issue's "mean predicted uplift against the planted one".

Glossary: B baskets of a week, P catalogue products, E events, K stores of a week.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from retailsim_core.ingest.lgsr import MISSION_FOCI
from retailsim_core.response.response_metrics import predicted_lifts, response_metrics
from retailsim_core.synth.config import BASKET_SIZES, PRICE_MODES
from retailsim_core.synth.oracle import (
    WeekDemand,
    purchase_probabilities,
    week_demand,
)
from retailsim_core.synth.uncut import uncut_probabilities
from retailsim_core.synth.world import PlantedTruth

PLANTED = ("planted_units", "planted_units_no_promotion")
_I64 = pl.Int64
_CODES = {"mission_focus": MISSION_FOCI, "price_mode": PRICE_MODES, "basket_size": BASKET_SIZES}


def planted_event_units(
    truth: PlantedTruth, samples: pl.DataFrame, events: pl.DataFrame, max_pairs: int = 250_000
) -> tuple[pl.Series, pl.Series]:
    """(E,) twice: each event's planted expected units over its store-week's baskets among
    ``samples`` (basket_id, store_id, week), with the week's cuts and without the event
    product's. A product the truth does not name has 0 for both. ``max_pairs``: (basket,
    product) pairs scored at once (``synth.uncut``), which bounds memory (~0.3 KB a pair)."""
    world = truth.world
    ctx = truth.context(samples).with_columns(store_id=samples["store_id"])
    index = {code: i for i, code in enumerate(world.catalogue.product_code)}
    keyed = (
        events.select("product_id", "store_id", "week")
        .with_row_index("event")
        .with_columns(p=pl.col("product_id").replace_strict(index, default=-1, return_dtype=_I64))
        .filter(pl.col("p") >= 0)
    )
    on, off = np.zeros(events.height), np.zeros(events.height)
    for (week,), cells in keyed.group_by("week"):
        baskets = _Baskets.of(ctx.filter(pl.col("week") == week))
        if baskets.n == 0:
            continue
        at = cells["store_id"].replace_strict(baskets.stores, default=-1, return_dtype=_I64)
        cells = cells.with_columns(k=at).filter(pl.col("k") >= 0)
        event, k, p = (cells[c].to_numpy() for c in ("event", "k", "p"))
        week = int(week)
        demand = week_demand(world, week)
        asked = np.unique(p)  # the oracle computes only these columns (each to the bit)
        sums = baskets.store_sums(world, week, demand, asked)  # (K, len(asked))
        on[event] = off[event] = sums[k, np.searchsorted(asked, p)]
        cut = world.prices.depth[week][p].any(axis=1)  # else removing the cut changes nothing
        for part in _chunks(p[cut], k[cut], baskets.store_of, len(baskets.stores), max_pairs):
            sums = baskets.uncut_sums(world, week, demand, *part)  # (products, K)
            hit = np.isin(p, part[0]) & cut
            off[event[hit]] = sums[np.searchsorted(part[0], p[hit]), k[hit]]
    return pl.Series(PLANTED[0], on), pl.Series(PLANTED[1], off)


def _chunks(p: np.ndarray, k: np.ndarray, store_of: np.ndarray, n_stores: int, max_pairs: int):
    """The events' products (``p``, with their stores' codes ``k``) distinct and sorted, in
    groups of at most ``max_pairs`` (basket, product) pairs (one product's pairs are never
    split), each with the boolean (products, K) table of the stores its events are in."""
    products, u = np.unique(p, return_inverse=True)
    stores = np.zeros((len(products), n_stores), bool)
    stores[u, k] = True
    pairs = stores.astype(np.int64) @ np.bincount(store_of, minlength=stores.shape[1])
    ends = np.cumsum(pairs)
    start = 0
    while start < len(products):
        stop = max(
            int(np.searchsorted(ends, ends[start] - pairs[start] + max_pairs, "right")), start + 1
        )
        yield products[start:stop], stores[start:stop]
        start = stop


class _Baskets:
    """A week's planted basket contexts as arrays, with their store codes (0..K-1)."""

    def __init__(self, frame: pl.DataFrame, stores: dict[str, int]):
        self.n, self.stores = frame.height, stores
        self.store_of = frame["store_id"].replace_strict(stores, return_dtype=_I64).to_numpy()
        self.customer = frame["customer_idx"].to_numpy()
        self.store_idx = frame["store_idx"].to_numpy()
        self.focus, self.mode, self.size = (
            frame[column]
            .replace_strict({c: i for i, c in enumerate(codes)}, return_dtype=_I64)
            .to_numpy()
            for column, codes in _CODES.items()
        )  # indices, as the oracle reads them

    @classmethod
    def of(cls, frame: pl.DataFrame) -> _Baskets:
        return cls(frame, {s: k for k, s in enumerate(frame["store_id"].unique().sort())})

    def uncut_sums(
        self, world, week: int, demand: WeekDemand, products: np.ndarray, stores: np.ndarray
    ) -> np.ndarray:
        """(U, K): per product of ``products`` the planted probabilities, with its own cut
        removed, of the baskets of the stores ``stores`` (U, K) marks, summed by store in
        basket order (as ``store_sums`` adds them)."""
        of, rows = np.nonzero(stores[:, self.store_of])  # per product, its baskets in order
        probs = uncut_probabilities(
            world,
            week,
            demand,
            products[of],
            rows,
            self.customer,
            self.store_idx,
            self.focus,
            self.mode,
            self.size,
        )
        out = np.zeros(stores.shape)
        np.add.at(out, (of, self.store_of[rows]), probs)
        return out

    def store_sums(self, world, week: int, demand: WeekDemand, products: np.ndarray) -> np.ndarray:
        """(K, C): the planted probabilities of the baskets holding each of ``products``
        (catalogue indices), summed by store."""
        probs = purchase_probabilities(
            world,
            week,
            self.customer,
            self.store_idx,
            self.focus,
            self.mode,
            self.size,
            demand,
            products,
        )  # (B, C)
        out = np.zeros((len(self.stores), probs.shape[1]))
        np.add.at(out, self.store_of, probs)
        return out


def planted_check(
    table: pl.DataFrame, products: pl.DataFrame, methods: dict, weights: np.ndarray
) -> dict:
    """Every method's metrics against the planted units and lifts of ``table`` (the events with
    ``PLANTED`` columns); ``products``: the observed per-product table whose row order
    ``weights`` was drawn for. Adds the planted mean lift (events-weighted)."""
    planted = predicted_lifts(table, *PLANTED)
    truth = products.select("product_id").join(
        planted, on="product_id", how="left", maintain_order="left"
    )
    truth = truth.with_columns(pl.col("lift").fill_null(0.0), pl.col("events").fill_null(0))
    scored = {
        name: response_metrics(truth, table, on, off, weights, units=PLANTED[0]).summary
        for name, (on, off) in methods.items()
    }
    n = truth["events"].cast(pl.Float64)
    mean_lift = float((truth["lift"] * n).sum() / max(n.sum(), 1.0))
    return {"mean_lift": mean_lift, "methods": scored}
