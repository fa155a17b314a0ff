import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retailsim_core import calendar as cal
from retailsim_core.calendar import COMPLETE_JOURNEY, LGSR, week_key_of


def test_lgsr_calendar_facts():
    assert len(cal.SHOP_WEEKS) == 117
    assert cal.shop_week_of(1) == 200607 and cal.shop_week_of(117) == 200819
    assert cal.shop_week_of(46) == 200652 and cal.shop_week_of(47) == 200701
    assert cal.monday_of(1) == dt.date(2006, 4, 10)
    assert cal.monday_of(117) + dt.timedelta(days=6) == dt.date(2008, 7, 6)
    assert cal.week_key_of(1) == "2006-04-10"


def test_lgsr_weekday_is_sunday_one():
    assert cal.lgsr_weekday(dt.date(2006, 4, 9)) == 1  # Sunday
    assert cal.lgsr_weekday(dt.date(2006, 4, 10)) == 2  # Monday
    assert cal.lgsr_weekday(dt.date(2006, 4, 15)) == 7  # Saturday


@given(st.integers(1, 117))
def test_week_conversions_round_trip(week):
    assert cal.week_of_shop_week(cal.shop_week_of(week)) == week
    assert cal.week_of_key(cal.week_key_of(week)) == week


@pytest.mark.parametrize("bad", [0, 118])
def test_out_of_range_weeks_raise(bad):
    with pytest.raises(ValueError):
        cal.shop_week_of(bad)
    with pytest.raises(ValueError):
        cal.week_of_shop_week(200653)
    with pytest.raises(ValueError):
        cal.week_of_key("2006-04-11")


def test_uk_bank_holidays_and_seasons():
    assert cal.easter_sunday(2007) == dt.date(2007, 4, 8) and cal.easter_sunday(2008) == dt.date(
        2008, 3, 23
    )
    h2006 = cal.uk_bank_holidays(2006)
    assert dt.date(2006, 12, 25) in h2006 and dt.date(2006, 12, 26) in h2006
    assert (
        dt.date(2006, 4, 14) in h2006 and dt.date(2006, 4, 17) in h2006
    )  # Good Friday, Easter Monday
    assert dt.date(2006, 5, 29) in h2006 and dt.date(2006, 8, 28) in h2006  # spring, summer
    assert dt.date(2007, 1, 1) in cal.uk_bank_holidays(2007)
    assert cal.uk_bank_holidays(2005)[-2:] == [
        dt.date(2005, 12, 26),
        dt.date(2005, 12, 27),
    ]  # Sunday 25th substituted
    assert [cal.season_of(m) for m in (1, 3, 6, 9, 12)] == [0, 1, 2, 3, 0]


def test_the_complete_journey_calendar():
    """Week 1 is the week of Monday 2016-12-26 (its one day of data is Sunday 2017-01-01)."""
    cj = COMPLETE_JOURNEY
    assert cj.week_key_of(1) == "2016-12-26" and cj.week_key_of(53) == "2017-12-25"
    assert cj.week_of_date(dt.date(2017, 1, 1)) == 1 and cj.week_of_date(dt.date(2017, 1, 2)) == 2
    assert all(cj.week_of_key(cj.week_key_of(w)) == w for w in range(1, 54))
    assert cj.end == dt.date(2018, 1, 1)
    for bad in (0, 54):
        with pytest.raises(ValueError, match="outside completejourney's 1..53"):
            cj.monday_of(bad)
    with pytest.raises(ValueError, match="not a Monday"):
        cj.week_of_key("2017-01-03")
    assert LGSR.week_key_of(1) == week_key_of(1) and LGSR.n_weeks == 117


def test_each_source_flags_its_own_countrys_holidays():
    assert [d.isoformat() for d in cal.us_federal_holidays(2017)] == [
        "2017-01-01",
        "2017-01-16",
        "2017-02-20",
        "2017-05-29",
        "2017-07-04",
        "2017-09-04",
        "2017-10-09",
        "2017-11-11",
        "2017-11-23",
        "2017-12-25",
    ]
    # LGSR's list is the one its calendar inputs always used: the UK's of 2005-2009
    assert LGSR.holiday_dates == sorted(
        {d for y in range(2005, 2010) for d in cal.uk_bank_holidays(y)}
    )
    cj = COMPLETE_JOURNEY.holiday_dates
    assert dt.date(2017, 11, 23) in cj and dt.date(2017, 12, 26) not in cj  # no Boxing Day
