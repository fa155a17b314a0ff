"""Samples from the temporal metadata: carded baskets only, big ones kept and flagged (D120)."""

import polars as pl

from retailsim_core.datasets.sample_buckets import METADATA_SCHEMA, samples_from_metadata


def test_a_basket_of_more_than_50_products_is_a_flagged_sample_in_every_split():
    rows = [  # basket, split, products, carded
        (1, "train", 73, True),
        (2, "train", 50, True),
        (3, "validation", 51, True),
        (4, "test", 12, True),
        (5, "train", 80, False),  # uncarded: no customer, no sample
    ]
    meta = (
        METADATA_SCHEMA.to_frame()
        .clear(len(rows))
        .with_columns(
            basket_id=pl.Series([r[0] for r in rows], dtype=pl.Int64),
            split=pl.Series([r[1] for r in rows]),
            num_products=pl.Series([r[2] for r in rows], dtype=pl.Int32),
            is_carded=pl.Series([r[3] for r in rows]),
        )
    )
    samples = samples_from_metadata(meta)
    assert samples["basket_id"].to_list() == [1, 2, 3, 4]
    assert samples["truncated"].to_list() == [True, False, True, False]
