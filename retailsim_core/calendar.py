"""The calendars of the sources: LGSR's fiscal calendar (117 Monday–Sunday shop weeks starting
2006-04-10) and The Complete Journey's (53 weeks, the first the week of Monday 2016-12-26).

Three names for one week, converted here and nowhere else:

- ``week``       1..n, the source's first week is 1 (used in every table);
- ``shop_week``  LGSR's ``SHOP_WEEK`` code, 200607..200652, 200701..200752, 200801..200819;
- ``week_key``   the Dagster partition key, the Monday as ``YYYY-MM-DD``.

The module-level functions are LGSR's (its week files and codes); :class:`SourceCalendar` is
the weeks of whichever source a run reads (``RETAILSIM_SOURCE``; D85).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import cached_property

import numpy as np

FIRST_MONDAY = dt.date(2006, 4, 10)
N_WEEKS = 117
# (fiscal year, first week code, last week code) in calendar order.
_FISCAL_YEARS = ((2006, 7, 52), (2007, 1, 52), (2008, 1, 19))

SHOP_WEEKS: tuple[int, ...] = tuple(
    year * 100 + wk for year, first, last in _FISCAL_YEARS for wk in range(first, last + 1)
)
assert len(SHOP_WEEKS) == N_WEEKS
_WEEK_OF_SHOP_WEEK = {code: i + 1 for i, code in enumerate(SHOP_WEEKS)}


def shop_week_of(week: int) -> int:
    """``week`` (1..117) to its LGSR ``SHOP_WEEK`` code."""
    if not 1 <= week <= N_WEEKS:
        raise ValueError(f"week {week} is outside 1..{N_WEEKS}")
    return SHOP_WEEKS[week - 1]


def week_of_shop_week(shop_week: int) -> int:
    """LGSR ``SHOP_WEEK`` code to ``week`` (1..117)."""
    try:
        return _WEEK_OF_SHOP_WEEK[int(shop_week)]
    except KeyError:
        raise ValueError(f"SHOP_WEEK {shop_week} is not one of LGSR's 117 weeks") from None


def monday_of(week: int) -> dt.date:
    shop_week_of(week)  # validates the range
    return FIRST_MONDAY + dt.timedelta(days=7 * (week - 1))


def week_key_of(week: int) -> str:
    """``week`` to the Dagster partition key (the Monday, ISO format)."""
    return monday_of(week).isoformat()


def week_of_key(key: str) -> int:
    """Dagster partition key (a Monday) to ``week``."""
    days = (dt.date.fromisoformat(key) - FIRST_MONDAY).days
    if days % 7:
        raise ValueError(f"partition key {key} is not a Monday of the LGSR calendar")
    week = days // 7 + 1
    shop_week_of(week)
    return week


@dataclass(frozen=True)
class SourceCalendar:
    """A source's weeks: ``week`` 1..``n_weeks``, Monday to Sunday, week 1 starting on
    ``first_monday``; ``train_end``/``valid_end`` its default split (the design's proportions,
    about 68% / 13% / 19%)."""

    source: str
    first_monday: dt.date
    n_weeks: int
    train_end: int
    valid_end: int
    holidays: str = "uk"  # whose public holidays the calendar inputs flag: "uk" | "us"

    @property
    def holiday_dates(self) -> list[dt.date]:
        """The public holidays of the calendar's years and one either side, sorted."""
        rule = {"uk": uk_bank_holidays, "us": us_federal_holidays}[self.holidays]
        first, last = self.first_monday.year, self.end.year
        return sorted({d for y in range(first - 1, last + 2) for d in rule(y)})

    @cached_property
    def holiday_days(self) -> np.ndarray:
        """``holiday_dates`` as days since 1970-01-01 (int64): computed once per calendar, read
        by every batch's calendar inputs."""
        return np.asarray(self.holiday_dates, dtype="datetime64[D]").astype(np.int64)

    def monday_of(self, week: int) -> dt.date:
        if not 1 <= week <= self.n_weeks:
            raise ValueError(f"week {week} is outside {self.source}'s 1..{self.n_weeks}")
        return self.first_monday + dt.timedelta(days=7 * (week - 1))

    def week_key_of(self, week: int) -> str:
        return self.monday_of(week).isoformat()

    def week_of_date(self, date: dt.date) -> int:
        """The week holding ``date`` (not checked against the range)."""
        return (date - self.first_monday).days // 7 + 1

    def week_of_key(self, key: str) -> int:
        days = (dt.date.fromisoformat(key) - self.first_monday).days
        if days % 7:
            raise ValueError(f"partition key {key} is not a Monday of {self.source}'s calendar")
        self.monday_of(days // 7 + 1)  # validates the range
        return days // 7 + 1

    @property
    def end(self) -> dt.date:
        """The Monday after the last week (exclusive end)."""
        return self.first_monday + dt.timedelta(weeks=self.n_weeks)


def lgsr_weekday(date: dt.date) -> int:
    """LGSR ``SHOP_WEEKDAY``: 1 = Sunday .. 7 = Saturday."""
    return date.isoweekday() % 7 + 1


def week_file_stem(week: int) -> str:
    return f"transactions_{shop_week_of(week)}"


def plan_file_stem(week: int) -> str:
    """The week's promotion plan beside its transactions (an LGSR-format source may have one)."""
    return f"promotions_{shop_week_of(week)}"


def easter_sunday(year: int) -> dt.date:
    """Gregorian Easter (anonymous Gregorian algorithm)."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = b // 4, b % 4
    f = (b + 8) // 25
    g = (b - f + 1) // 3
    h = (19 * a + b - d - g + 15) % 30
    i, k = c // 4, c % 4
    el = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * el) // 451
    month = (h + el - 7 * m + 114) // 31
    day = (h + el - 7 * m + 114) % 31 + 1
    return dt.date(year, month, day)


def _weekday_on_or_after(d: dt.date, weekday: int) -> dt.date:
    return d + dt.timedelta(days=(weekday - d.weekday()) % 7)


def _substitute(d: dt.date, taken: set[dt.date]) -> dt.date:
    """A holiday on a weekend moves to the next free weekday."""
    while d.weekday() >= 5 or d in taken:
        d += dt.timedelta(days=1)
    return d


def uk_bank_holidays(year: int) -> list[dt.date]:
    """England & Wales bank holidays (LGSR's regions are British)."""
    easter = easter_sunday(year)
    fixed = [
        easter - dt.timedelta(days=2),
        easter + dt.timedelta(days=1),
        _weekday_on_or_after(dt.date(year, 5, 1), 0),  # early May
        _weekday_on_or_after(dt.date(year, 5, 25), 0),  # spring: last Monday of May
        _weekday_on_or_after(dt.date(year, 8, 25), 0),
    ]  # summer: last Monday of August
    taken: set[dt.date] = set(fixed)
    for d in (dt.date(year, 1, 1), dt.date(year, 12, 25), dt.date(year, 12, 26)):
        taken.add(_substitute(d, taken))
    return sorted(taken)


def us_federal_holidays(year: int) -> list[dt.date]:
    """US federal holidays on their own dates (The Complete Journey's stores are American): a
    grocery's holiday is the day itself, not the weekday an office observes it on."""
    nth = _weekday_on_or_after
    return sorted(
        [
            dt.date(year, 1, 1),
            nth(dt.date(year, 1, 15), 0),  # Martin Luther King Jr. Day: third Monday of January
            nth(dt.date(year, 2, 15), 0),  # Washington's Birthday: third Monday of February
            nth(dt.date(year, 5, 25), 0),  # Memorial Day: last Monday of May
            dt.date(year, 7, 4),
            nth(dt.date(year, 9, 1), 0),  # Labor Day: first Monday of September
            nth(dt.date(year, 10, 8), 0),  # Columbus Day: second Monday of October
            dt.date(year, 11, 11),
            nth(dt.date(year, 11, 22), 3),  # Thanksgiving: fourth Thursday of November
            dt.date(year, 12, 25),
        ]
    )


def season_of(month: int) -> int:
    """Meteorological season: 0 winter (Dec-Feb), 1 spring, 2 summer, 3 autumn."""
    return (month % 12) // 3


LGSR = SourceCalendar("lgsr", FIRST_MONDAY, N_WEEKS, train_end=80, valid_end=95)
COMPLETE_JOURNEY = SourceCalendar(
    "completejourney", dt.date(2016, 12, 26), 53, train_end=36, valid_end=43, holidays="us"
)
CALENDARS = {c.source: c for c in (LGSR, COMPLETE_JOURNEY)}
