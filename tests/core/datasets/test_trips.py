"""The trip store's order: built a column and a slice of rows at a time, from a frame or from a
scan, it equals one sort of the whole frame, in one chunk."""

import datetime as dt
from unittest import mock

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from retailsim_core.datasets import trips
from retailsim_core.datasets.trips import TIME_ORDER, TRIPS_SCHEMA, TripStore


@settings(max_examples=20, deadline=None)
@given(n=st.integers(0, 40), seed=st.integers(0, 2**16), rows=st.integers(1, 9))
def test_the_store_is_its_trips_sorted_in_time_order(n, seed, rows):
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
    with mock.patch.object(trips, "GATHER_ROWS", rows):  # slices of `rows` trips per gather
        stores = [TripStore.build(frame), TripStore.from_scan(frame.lazy())]
    for store in stores:
        assert_frame_equal(store.trips, frame.sort(*TIME_ORDER))
        assert store.trips.n_chunks("all") == [1] * len(TRIPS_SCHEMA)
        assert store.customers["end"].sum() - store.customers["start"].sum() == n
    assert_frame_equal(stores[0].customers, stores[1].customers)
