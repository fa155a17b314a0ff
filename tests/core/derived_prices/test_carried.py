"""Carried-state shelf prices (D96): the dense weeks replayed from the stored observed rows are
the dense engine's tables cell for cell, and so are the price features carried by slot."""

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from retailsim_core.derived_prices import PriceConfig
from retailsim_core.derived_prices.carried import replay, replay_state, stored_rows
from retailsim_core.derived_prices.cells import SUMMARY_COLUMNS, advance, advance_observed
from retailsim_core.derived_prices.state import CellState
from retailsim_core.features.feature_tables import (
    PRICE_STATE_SCHEMA,
    PriceFeatureCarry,
    next_price_state,
    price_features,
)
from tests.core.derived_prices.test_cells import observed_by_week, random_raw

CFG = PriceConfig()
WEEKS = range(1, 41)  # > history_weeks: the ring wraps and cells leave the windows


def dense_and_stored(raw: pl.DataFrame, weeks: range) -> tuple[dict, dict]:
    observed, state = observed_by_week(raw, weeks), CellState(CFG)
    dense = {w: advance(state, observed[w], w) for w in weeks}
    return dense, {w: stored_rows(t) for w, t in dense.items()}


# A real-shaped fixture: regular prices recorded on some lines (and drifting below the paid
# one), stores that stop selling, products that arrive late; and one without regions (CJ).
@pytest.mark.parametrize(("regular_share", "regions"), [(0.0, True), (0.6, True), (1.0, False)])
def test_replayed_weeks_are_the_dense_tables(regular_share, regions):
    raw = random_raw(5, len(WEEKS), regular_share=regular_share, regions=regions)
    dense, stored = dense_and_stored(raw, WEEKS)
    asked = [3, 17, 26, 27, 40]
    got = dict(replay(stored.__getitem__, asked, CFG))
    assert sorted(got) == asked
    for w in asked:
        assert_frame_equal(got[w], dense[w])  # exact, in slot order
    assert sum(t.height for t in stored.values()) < sum(t.height for t in dense.values()) / 2


def test_stored_rows_are_the_observed_cells_only():
    dense, stored = dense_and_stored(random_raw(6, 12), range(1, 13))
    for w in range(1, 13):
        assert set(stored[w]["imputation_method"]) <= {"observed"}
        observed = dense[w].filter(pl.col("imputation_method") == "observed")
        assert_frame_equal(stored[w], observed)


@pytest.mark.parametrize(("regular_share", "regions"), [(0.0, True), (0.6, True), (1.0, False)])
def test_the_observed_rows_without_the_dense_table_are_its_observed_rows(regular_share, regions):
    """What ``derived_prices`` writes, built from the week's observed slots only: the dense
    table's observed rows exactly, and its summary columns over every cell."""
    raw = random_raw(7, 30, regular_share=regular_share, regions=regions)
    observed = observed_by_week(raw, range(1, 31))
    dense, stored = dense_and_stored(raw, range(1, 31))
    state = CellState(CFG)
    for w in range(1, 31):
        rows, summary = advance_observed(state, observed[w], w)
        assert_frame_equal(rows, stored[w], check_exact=True)
        assert_frame_equal(summary, dense[w].select(SUMMARY_COLUMNS), check_exact=True)


def test_a_replayed_state_continues_bitwise():
    observed = observed_by_week(random_raw(2, 37), range(1, 38))
    dense, stored = dense_and_stored(random_raw(2, 37), range(1, 38))
    for resume_at in (2, 5, 30, 35):
        state = replay_state(stored.__getitem__, resume_at - 1, CFG)
        for w in range(resume_at, 38):
            assert advance(state, observed[w], w).equals(dense[w]), (resume_at, w)


def test_a_replay_refuses_weeks_its_state_is_past():
    _, stored = dense_and_stored(random_raw(3, 6), range(1, 7))
    state = replay_state(stored.__getitem__, 4, CFG)
    with pytest.raises(ValueError, match="past week 3"):
        list(replay(stored.__getitem__, [3, 5], CFG, state))


def test_features_carried_by_slot_equal_the_joined_reference():
    raw = random_raw(7, len(WEEKS), regular_share=0.3)
    # A free line: a zero price the features replace by the sub-commodity's median.
    raw = raw.with_columns(
        spend=pl.when(pl.int_range(pl.len()) == 40).then(0.0).otherwise(pl.col("spend"))
    )
    codes = {p: f"C{int(p[3:]) % 3}" for p in raw["product_id"].unique()}
    categories = pl.DataFrame({"product_id": list(codes), "prod_code_10": list(codes.values())})
    dense, _ = dense_and_stored(raw, WEEKS)
    carry, prev, imputed = PriceFeatureCarry(categories), PRICE_STATE_SCHEMA.to_frame(), 0
    for w in WEEKS:
        got = carry.week(dense[w])
        want = price_features(dense[w], categories, prev)
        assert_frame_equal(got.sort("product_id", "store_id"), want)
        prev, imputed = next_price_state(want), imputed + int(got["is_imputed_price"].sum())
    assert imputed > 0
