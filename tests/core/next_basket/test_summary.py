"""Test-week slices on every source's calendar."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from retailsim_core.next_basket.summary import week_ranges

LGSR = ((96, 104), (105, 117))


def test_the_configured_slices_hold_where_they_meet_the_scored_weeks():
    assert week_ranges(np.array([96, 100, 117]), LGSR) == LGSR
    assert week_ranges(np.array([100, 101]), LGSR) == ((96, 104),)


def test_another_calendar_gets_its_test_weeks_in_two_halves():
    assert week_ranges(np.array([44, 47, 53, 50]), LGSR) == ((44, 48), (49, 53))
    assert week_ranges(np.array([44, 44]), LGSR) == ((44, 44),)
    assert week_ranges(np.array([], dtype=int), LGSR) == ()
    assert week_ranges(np.array([44, 53]), ()) == ()  # no slices asked for: none drawn


@given(st.lists(st.integers(1, 60), min_size=1, max_size=40))
def test_the_halves_cover_every_scored_week_once(weeks):
    weeks = np.array(weeks)
    ranges = week_ranges(weeks, LGSR)
    covered = [sum(lo <= w <= hi for lo, hi in ranges) for w in weeks]
    assert covered == [1] * len(weeks)
