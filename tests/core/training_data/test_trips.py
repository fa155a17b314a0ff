"""The trip store's order: built a column at a time, it equals one sort of the whole frame."""

import datetime as dt

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from retailsim_core.training_data.trips import TIME_ORDER, TRIPS_SCHEMA, TripStore


@settings(max_examples=20, deadline=None)
@given(n=st.integers(0, 40), seed=st.integers(0, 2**16))
def test_the_store_is_its_trips_sorted_in_time_order(n, seed):
    rng = np.random.default_rng(seed)
    given = {
        "customer_id": [f"C{c}" for c in rng.integers(0, 5, n)],
        "shop_date": [dt.date(2006, 1, 1) + dt.timedelta(int(d)) for d in rng.integers(0, 9, n)],
        "shop_hour": rng.integers(8, 10, n).tolist(),
        "basket_id": rng.permutation(n).tolist(),  # unique, in no order
        "products": [[f"P{p}" for p in rng.integers(0, 4, k)] for k in rng.integers(0, 3, n)],
    }
    frame = pl.DataFrame(  # the other columns null
        [pl.Series(c, given.get(c, [None] * n), dtype=t) for c, t in TRIPS_SCHEMA.items()]
    )
    store = TripStore.build(frame)
    assert_frame_equal(store.trips, frame.sort(*TIME_ORDER))
    assert store.customers["end"].sum() - store.customers["start"].sum() == n
