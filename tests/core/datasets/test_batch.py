"""The typed batch: one conversion from arrays, named keys only, codes as int64."""

import numpy as np
import pytest
import torch

from retailsim_core.datasets.batch import INTEGER_KEYS, Batch, to_batch


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
