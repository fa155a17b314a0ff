"""The typed batch: one conversion from arrays, named keys only, codes as int64."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from retailsim_core.datasets.batch import INTEGER_KEYS, Batch, batch_range, to_batch


def test_codes_become_int64_and_other_arrays_keep_their_dtype():
    batch = to_batch(
        {
            "customer_codes": np.array([[1, 2]], dtype=np.int8),
            "calendar": np.zeros((1, 7), dtype=np.float32),
            "item_mask": np.array([[True, False]]),
        }
    )
    assert batch["customer_codes"].dtype == torch.int64
    assert batch["customer_codes"].tolist() == [[1, 2]]
    assert batch["calendar"].dtype == torch.float32 and batch["item_mask"].dtype == torch.bool


def test_a_non_contiguous_array_is_copied_into_a_contiguous_tensor():
    prices = np.arange(12, dtype=np.float32).reshape(2, 3, 2)[:, ::2]
    assert not prices.flags.c_contiguous
    out = to_batch({"item_prices": prices})["item_prices"]
    assert out.is_contiguous() and out.numpy().tolist() == prices.tolist()


def test_an_unknown_key_is_refused():
    with pytest.raises(KeyError, match="labels_of_trip"):
        to_batch({"labels_of_trip": np.zeros((1, 4), dtype=np.int64)})


def test_every_integer_key_is_a_batch_key():
    assert INTEGER_KEYS <= set(Batch.__annotations__)


# Rows of trips of products: B rows, H trips each, a trip a (possibly empty) list of products.
ROWS = st.integers(1, 3).flatmap(
    lambda h: st.lists(
        st.lists(st.lists(st.integers(1, 5), max_size=3), min_size=h, max_size=h),
        min_size=1,
        max_size=5,
    )
)


@given(rows=ROWS, data=st.data())
def test_a_range_of_rows_gets_exactly_those_rows_trips(rows, data):
    """Oracle: the history bags of ``batch_range`` are the whole batch's bags of those rows."""
    trips = [t for row in rows for t in row]
    lengths = np.array([len(t) for t in trips])
    batch = to_batch(
        {
            "history_items": np.array([p for t in trips for p in t], dtype=np.int64),
            "history_offsets": np.cumsum(lengths) - lengths,
            "history_mask": np.array([[len(t) > 0 for t in row] for row in rows]),
            "calendar": np.arange(len(rows) * 7, dtype=np.float32).reshape(-1, 7),
        }
    )
    start = data.draw(st.integers(0, len(rows) - 1))
    stop = data.draw(st.integers(start + 1, len(rows)))
    part = batch_range(batch, start, stop)
    table = torch.arange(6 * 2, dtype=torch.float32).reshape(6, 2)
    h = len(rows[0])

    def bags(b):
        return F.embedding_bag(b["history_items"], table, b["history_offsets"], mode="sum")

    assert torch.equal(bags(part), bags(batch)[start * h : stop * h])
    assert torch.equal(part["calendar"], batch["calendar"][start:stop])
    assert torch.equal(part["history_mask"], batch["history_mask"][start:stop])
