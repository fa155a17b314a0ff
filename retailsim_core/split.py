"""The one temporal split every stage uses: train <= 80 < validation <= 95 < test (weeks
1..117 on LGSR; 36 / 43 / 53 on The Complete Journey, calendar.CALENDARS)."""

from __future__ import annotations

from dataclasses import dataclass

from retailsim_core.calendar import N_WEEKS


@dataclass(frozen=True)
class TemporalSplit:
    train_end: int = 80  # last training week
    valid_end: int = 95  # last validation week; test is valid_end+1 .. last_week
    last_week: int = N_WEEKS  # the source's last week (117 for LGSR)

    def __post_init__(self):
        if not 1 <= self.train_end < self.valid_end < self.last_week:
            raise ValueError(f"need 1 <= train_end < valid_end < {self.last_week}, got {self}")

    def split_of(self, week: int) -> str:
        return (
            "train"
            if week <= self.train_end
            else ("validation" if week <= self.valid_end else "test")
        )

    @property
    def train_weeks(self) -> range:
        return range(1, self.train_end + 1)

    @property
    def validation_weeks(self) -> range:
        return range(self.train_end + 1, self.valid_end + 1)

    @property
    def test_weeks(self) -> range:
        return range(self.valid_end + 1, self.last_week + 1)
