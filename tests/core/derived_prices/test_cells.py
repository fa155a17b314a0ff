"""The array engine against the Polars reference, and its bookkeeping (its replay from stored
rows: test_carried.py)."""

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from retailsim_core.derived_prices import (
    DERIVED_PRICES_SCHEMA,
    PriceConfig,
    observed_prices,
    reference,
)
from retailsim_core.derived_prices import kernel as price_kernel
from retailsim_core.derived_prices.cells import advance
from retailsim_core.derived_prices.fold import fold_week_numpy
from retailsim_core.derived_prices.slots import Growable, KeyIndex
from retailsim_core.derived_prices.state import CellState

CFG = PriceConfig()


def random_raw(
    seed: int,
    weeks: int,
    products: int = 8,
    stores: int = 12,
    lines: int = 25,
    regular_share: float = 0.0,
    regions: bool = True,
) -> pl.DataFrame:
    """Lines of a few products in stores of 3 regions x 2 formats; products and stores start
    selling at random weeks and skip weeks, so every waterfall level and the ring wrap-around
    occur. ``regular_share`` of the lines record their regular shelf spend (the rest: null);
    without ``regions`` no store records its region or format (The Complete Journey)."""
    rng = np.random.default_rng(seed)
    store_region = rng.choice(["E01", "N02", "W03"], stores)
    store_format = rng.choice(["LS", "SS"], stores)
    regular = rng.uniform(0.5, 30.0, products)
    week = rng.integers(1, weeks + 1, lines * weeks)
    product = np.minimum(
        rng.integers(0, products, week.size), (week - 1) // 3
    )  # new products arrive late
    store = rng.integers(0, stores, week.size)
    store = np.where(
        (store < 3) & (week > 8), store + 3, store
    )  # stores 0-2 stop selling after week 8
    quantity = rng.integers(1, 4, week.size)
    discount = np.where(rng.random(week.size) < 0.2, rng.uniform(0.1, 0.8, week.size), 0.0)
    spend = np.round(regular[product] * (1 - discount) * quantity, 2)
    # Drawn last, so the other columns do not depend on it; the recorded regular price drifts
    # from the product's list price (regular changes), sometimes below the paid one (bad data).
    recorded = rng.random(week.size) < regular_share
    shelf = regular[product] * rng.uniform(0.9, 1.3, week.size) * quantity
    return pl.DataFrame(
        {
            "week": week.astype(np.int16),
            "product_id": [f"PRD{p:07d}" for p in product + 1],
            "store_id": [f"STORE{s:05d}" for s in store + 1],
            "store_region": pl.Series(store_region[store], dtype=pl.String).set(
                pl.Series([not regions] * store.size), None
            ),
            "store_format": pl.Series(store_format[store], dtype=pl.String).set(
                pl.Series([not regions] * store.size), None
            ),
            "spend": spend,
            "regular_spend": pl.Series(np.round(shelf, 2)).set(pl.Series(~recorded), None),
            "quantity": quantity.astype(np.int32),
        }
    )


def observed_by_week(raw: pl.DataFrame, weeks: range) -> dict[int, pl.DataFrame]:
    return {w: observed_prices(raw.filter(pl.col("week") == w).lazy()).collect() for w in weeks}


FOLDS = [
    fold_week_numpy,
    pytest.param(
        price_kernel.fold_week_compiled,
        marks=pytest.mark.skipif(
            not price_kernel.available(),
            reason="no C compiler: the compiled price kernel is not built",
        ),
    ),
]


@pytest.mark.parametrize(
    ("regular_share", "regions"), [(0.0, True), (0.6, True), (1.0, False)], ids=str
)
@pytest.mark.parametrize("fold", FOLDS)
def test_engine_matches_the_polars_reference(fold, regular_share, regions):
    weeks = range(1, 41)  # > history_weeks: the ring wraps and cells leave the windows
    raw = random_raw(0, len(weeks), regular_share=regular_share, regions=regions)
    observed = observed_by_week(raw, weeks)
    fast, ref, methods = CellState(CFG), reference.PriceState.empty(), set()
    for w in weeks:
        got = advance(fast, observed[w], w, fold=fold)
        want, ref = reference.derive_week(ref, observed[w], w, CFG)
        assert got.schema == DERIVED_PRICES_SCHEMA
        order = ["product_id", "store_id"]
        # abs 1e-6: the engine keeps level-2 sums in integer millionths (exact under any order).
        assert_frame_equal(
            got.sort(order), want.sort(order), check_exact=False, rel_tol=1e-9, abs_tol=1e-6
        )
        methods |= set(got["imputation_method"])
    assert methods == {
        "observed",
        "product_store_mean",
        "product_region_week_mean",
        "product_chain_mean",
    }
    assert (got["validation_flags"] > 0).any() and got["promo_flag"].any()


def test_slot_order_is_first_week_then_cell():
    weeks = range(1, 12)
    observed = observed_by_week(random_raw(1, len(weeks)), weeks)
    state = CellState(CFG)
    tables = [advance(state, observed[w], w) for w in weeks]
    last = tables[-1]
    assert last["first_week"].is_sorted()
    for table in tables:  # each week's cells are the first rows of every later week
        assert_frame_equal(
            table.select("product_id", "store_id"),
            last.head(table.height).select("product_id", "store_id"),
        )


def test_advance_rejects_a_skipped_week():
    state = CellState(CFG)
    with pytest.raises(ValueError, match="cannot derive week 2"):
        advance(state, observed_by_week(random_raw(4, 2), range(2, 3))[2], 2)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 50), max_size=8), min_size=1, max_size=6))
def test_key_index_ids_are_stable_and_in_arrival_order(batches):
    index, seen = KeyIndex(), []
    for batch in batches:
        keys = np.array(batch, np.int64) * 7919  # sparse keys
        ids = index.ids(keys)
        for key in keys:
            if key not in seen:
                seen.append(key)
        assert ids.tolist() == [seen.index(k) for k in keys]
    assert index.lookup(np.array([-1, 10**12])).tolist() == [-1, -1]
    if seen:
        with pytest.raises(ValueError):
            index.add(np.array([seen[0]]))


def test_growable_keeps_values_and_fills_new_entries():
    g = Growable()
    g.declare("x", np.float64, np.nan)
    g.declare("ring", np.int16, 7, rows=2)
    g.grow(3)
    g["x"][:] = [1.0, 2.0, 3.0]
    g["ring"][1] = 5
    g.grow(2000)  # forces reallocation
    assert (
        g["x"].shape == (2003,)
        and g["x"][:3].tolist() == [1.0, 2.0, 3.0]
        and np.isnan(g["x"][3:]).all()
    )
    assert (
        g["ring"].shape == (2, 2003)
        and (g["ring"][1, :3] == 5).all()
        and (g["ring"][:, 3:] == 7).all()
    )
    spare = (
        Growable()
    )  # growing within capacity fills the new entries too (spare capacity is uninitialised)
    spare.declare("x", np.float64, np.nan)
    spare.grow(10)
    spare.arrays["x"][:] = 4.0  # scribble over the live entries and the spare capacity
    spare.grow(5)
    assert (
        spare.capacity == 1024
        and (spare["x"][:10] == 4.0).all()
        and np.isnan(spare["x"][10:]).all()
    )
