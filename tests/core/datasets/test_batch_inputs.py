import datetime as dt

import hypothesis
import hypothesis.strategies as st


def _days(dates):
    import numpy as np

    return np.asarray(dates, dtype="datetime64[D]").astype(np.int64)


def test_calendar_inputs_follow_the_source_calendar():
    import datetime as dt

    import numpy as np

    from retailsim_core.calendar import COMPLETE_JOURNEY, LGSR
    from retailsim_core.datasets.batch_inputs import calendar_inputs

    days = _days([dt.date(2017, 11, 23), dt.date(2017, 11, 24)])
    args = (days, np.array([10, 11]), np.array([48, 48]), np.array([-1, 3]))
    us = calendar_inputs(*args, COMPLETE_JOURNEY)
    uk = calendar_inputs(*args, LGSR)
    assert us[:, 3].tolist() == [1.0, 0.0]  # Thanksgiving is a US holiday
    assert uk[:, 3].tolist() == [0.0, 0.0]
    assert us[0, 5] == np.float32(48 / 53) and uk[0, 5] == np.float32(48 / 117)


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(
    dates=st.lists(st.dates(dt.date(1990, 1, 1), dt.date(2035, 12, 31)), min_size=1, max_size=40)
)
def test_calendar_inputs_equal_the_standard_library_on_every_date(dates):
    """Oracle: numpy's date arithmetic against ``datetime`` (ISO weeks across New Year, LGSR's
    weekday code 1 = Sunday, months to seasons, holidays)."""
    import numpy as np

    from retailsim_core.calendar import COMPLETE_JOURNEY
    from retailsim_core.datasets.batch_inputs import calendar_inputs

    n = len(dates)
    got = calendar_inputs(_days(dates), np.zeros(n), np.ones(n), np.zeros(n), COMPLETE_JOURNEY)
    holidays = set(COMPLETE_JOURNEY.holiday_dates)
    for row, d in zip(got, dates, strict=True):
        assert row[0] == d.isocalendar()[1]
        assert row[1] == d.isoweekday() % 7 + 1
        assert row[3] == (d in holidays)
        assert row[4] == (d.month % 12) // 3
    assert COMPLETE_JOURNEY.holiday_days is COMPLETE_JOURNEY.holiday_days  # computed once


def test_a_new_store_reads_its_format_and_region_row_even_when_both_are_unknown():
    import numpy as np
    import polars as pl

    from retailsim_core.datasets.batch_inputs import STORE_COLUMNS, store_inputs

    def row(store, fmt, region, value):
        keys = {"store_id": store, "store_format": fmt, "store_region": region, "week": 5}
        return keys | dict.fromkeys(STORE_COLUMNS, value)

    stores = pl.DataFrame(
        [
            row("STORE00001", None, None, 1.0),
            row(None, None, None, 2.0),  # the fallback of a source without regions
            row(None, "LS", "E02", 3.0),
        ]
    )
    basket = pl.DataFrame(
        {
            "store_id": ["STORE00001", "STORE00007", "STORE00008"],
            "store_format": [None, None, "LS"],
            "store_region": [None, None, "E02"],
            "week": [5, 5, 5],
        }
    )
    numeric, codes, is_new = store_inputs(basket, stores)
    assert numeric[:, 0].tolist() == [1.0, 2.0, 3.0]  # not zeros for the unknown region
    assert is_new.tolist() == [False, True, True]
    assert codes[:, 2].tolist() == [1, 0, 0] and np.isfinite(numeric).all()


def test_the_trip_index_tokenised_in_slices_equals_one_pass(monkeypatch, tmp_path):
    """Tokenised a slice at a time, and on disk from a store on disk: the arrays of one pass."""
    import datetime as dt

    import numpy as np
    import polars as pl

    from retailsim_core.datasets import batch_inputs
    from retailsim_core.datasets.tokens import PAD, ProductVocab
    from retailsim_core.datasets.trips import TRIPS_SCHEMA, TripStore

    rng = np.random.default_rng(7)
    n = 23
    lists = [[f"P{p}" for p in rng.choice(9, k, replace=False)] for k in rng.integers(1, 5, n)]
    frame = pl.DataFrame(
        {
            "customer_id": [f"C{c}" for c in rng.integers(0, 4, n)],
            "basket_id": rng.permutation(n).tolist(),
            "shop_date": [dt.date(2006, 1, 1 + int(d)) for d in rng.integers(0, 20, n)],
            "store_id": [f"S{s}" for s in rng.integers(0, 3, n)],
            "products": lists,
        }
    )
    frame = pl.DataFrame(  # every other column null
        [frame[c] if c in frame.columns else pl.Series(c, [None] * n) for c in TRIPS_SCHEMA]
    ).cast(dict(TRIPS_SCHEMA))
    store = TripStore.build(frame)
    vocab = ProductVocab.from_products([f"P{p}" for p in range(7)])  # P7, P8 unknown: [PAD]
    whole = batch_inputs.TripIndex.build(store.trips, vocab)
    monkeypatch.setattr(batch_inputs, "TOKEN_CHUNK", 4)  # slices of 4 trips, a short last one
    sliced = batch_inputs.TripIndex.build(store.trips, vocab)
    np.testing.assert_array_equal(sliced.arrays.tokens, whole.arrays.tokens)
    token_of = dict(zip(vocab.frame()["product_id"], vocab.frame()["token"], strict=True))
    want = [token_of.get(p, PAD) for basket in store.trips["products"].to_list() for p in basket]
    assert sliced.arrays.tokens.tolist() == want
    np.testing.assert_array_equal(sliced.arrays.offsets, whole.arrays.offsets)
    assert (sliced.arrays.tokens == PAD).any() and len(sliced.arrays.tokens) == sum(map(len, lists))
    # On disk, from a store on disk: every array the same, and a read-only memory map.
    from retailsim_core.storage.mapped import MappedArrays

    mapped = MappedArrays(tmp_path)
    disk = TripStore.write_sorted([frame.lazy()], mapped.subfolder("trips"), part_trips=5)
    on_disk = batch_inputs.TripIndex.build(disk.trips, vocab, mapped)
    for name in ("tokens", "offsets", "day", "store", "hour", "weekend", "mission"):
        got, want = getattr(on_disk.arrays, name), getattr(whole.arrays, name)
        np.testing.assert_array_equal(got, want)
        assert not got.flags.writeable
    np.testing.assert_array_equal(on_disk.customer, whole.customer)
    assert not on_disk.customer.flags.writeable
