"""The trip store's order: built a column and a slice of rows at a time, from a frame or from a
scan, it equals one sort of the whole frame, in one chunk; written to disk a range of customers
at a time, the same rows."""

import datetime as dt
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import polars as pl
import pytest
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


@settings(max_examples=20, deadline=None)
@given(n=st.integers(0, 40), seed=st.integers(0, 2**16), part=st.integers(1, 12))
def test_the_store_on_disk_is_the_store_in_memory(n, seed, part):
    """Written a range of customers at a time (``part`` trips a range) and opened mapped, the
    store has the rows, order and customer runs of the one sorted in memory."""
    rng = np.random.default_rng(seed)
    given = {
        "customer_id": [f"C{c}" for c in rng.integers(0, 7, n)],
        "week": rng.integers(1, 5, n).tolist(),
        "shop_date": [dt.date(2006, 1, 1) + dt.timedelta(int(d)) for d in rng.integers(0, 9, n)],
        "basket_id": rng.permutation(n).tolist(),
        "products": [[f"P{p}" for p in rng.integers(0, 4, k)] for k in rng.integers(0, 3, n)],
    }
    frame = pl.DataFrame(
        [pl.Series(c, given.get(c, [None] * n), dtype=t) for c, t in TRIPS_SCHEMA.items()]
    )
    memory = TripStore.build(frame)
    with tempfile.TemporaryDirectory() as folder:
        disk = TripStore.write_sorted(
            [w.lazy() for w in frame.partition_by("week")], Path(folder), part_trips=part
        )
        assert_frame_equal(disk.trips, memory.trips)
        assert_frame_equal(disk.customers, memory.customers)
        weeks = pl.Series([3] * len(memory.customers))
        assert_frame_equal(
            disk.history_bounds(memory.customers["customer_id"], weeks),
            memory.history_bounds(memory.customers["customer_id"], weeks),
        )


def test_a_store_on_disk_refuses_trips_without_a_customer(tmp_path):
    frame = pl.DataFrame([pl.Series(c, [None], dtype=t) for c, t in TRIPS_SCHEMA.items()])
    with pytest.raises(ValueError, match="without a customer_id"):
        TripStore.write_sorted([frame.lazy()], tmp_path)


def test_a_store_missing_a_part_is_refused_not_read_short(tmp_path):
    frame = pl.DataFrame(
        [
            pl.Series(c, {"customer_id": ["A", "B"], "week": [1, 1]}.get(c, [None] * 2), dtype=t)
            for c, t in TRIPS_SCHEMA.items()
        ]
    )
    TripStore.write_sorted([frame.lazy()], tmp_path, part_trips=1)
    assert TripStore.open(tmp_path).trips.height == 2
    (tmp_path / "trips-00001.arrow").unlink()
    with pytest.raises(ValueError, match="a part is missing"):
        TripStore.open(tmp_path)
