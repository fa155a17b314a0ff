"""The pairs seen to date: each week's new pairs are exactly those no earlier week held."""

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retailsim_core.features.seen_pairs import SeenPairs

ids = st.sampled_from(["S1", "S2", "S10", "", "P1", "é"])
weeks = st.lists(st.lists(st.tuples(ids, ids), max_size=12), min_size=1, max_size=6)


@settings(max_examples=80, deadline=None)
@given(weeks=weeks)
def test_new_pairs_are_the_set_difference_week_after_week(weeks):
    """Against a Python set: repeated pairs within a week, ids shared by stores and products,
    the empty string; the new pairs in order of first appearance."""
    seen, brute = SeenPairs(), set()
    for rows in weeks:
        frame = pl.DataFrame(
            rows, schema={"store_id": pl.String, "product_id": pl.String}, orient="row"
        )
        got = seen.add(frame).rows()
        want = list(dict.fromkeys(r for r in rows if r not in brute))
        assert got == want
        brute |= set(rows)
        assert seen.size == len(brute)


def test_the_pairs_frame_keeps_other_columns_out_and_nulls_are_refused():
    seen = SeenPairs()
    rows = pl.DataFrame({"store_id": ["S1", "S1"], "product_id": ["A", "A"], "basket_id": [1, 2]})
    assert seen.add(rows).columns == ["store_id", "product_id"]
    assert seen.add(rows).height == 0
    with pytest.raises(ValueError, match="nulls"):
        seen.add(pl.DataFrame({"store_id": ["S1"], "product_id": [None]}, schema_overrides={
            "product_id": pl.String}))  # fmt: skip
