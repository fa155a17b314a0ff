"""What is in the raw directory: LGSR week files and a fingerprint of each (for sensors)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from retailsim_core.calendar import week_of_shop_week

# Any letter case: exports from case-insensitive file systems (decision D55).
WEEK_FILE = re.compile(r"^transactions_([0-9]{6})\.csv(\.gz)?$", re.IGNORECASE)  # ASCII


@dataclass(frozen=True, order=True)
class WeekFile:
    week: int
    name: str
    fingerprint: str  # size and modification time: changes when the file is replaced
    modified: float = 0.0  # modification time, seconds since the epoch


def list_week_files(raw_dir: Path) -> list[WeekFile]:
    """LGSR week files in ``raw_dir`` (names outside the 117-week calendar are ignored)."""
    if not Path(raw_dir).is_dir():
        return []
    out = []
    for path in Path(raw_dir).iterdir():
        m = WEEK_FILE.match(path.name)
        if not m:
            continue
        try:
            week = week_of_shop_week(int(m.group(1)))
        except ValueError:
            continue
        st = path.stat()
        out.append(WeekFile(week, path.name, f"{st.st_size}:{st.st_mtime_ns}", st.st_mtime))
    return sorted(out)


def outside_calendar(raw_dir: Path) -> list[str]:
    """Names of ``raw_dir`` that look like week files but name no week of the calendar
    (``transactions_200820.csv``): never ingested, so a sensor must say so (D113)."""
    if not Path(raw_dir).is_dir():
        return []
    out = []
    for path in Path(raw_dir).iterdir():
        m = WEEK_FILE.match(path.name)
        if m:
            try:
                week_of_shop_week(int(m.group(1)))
            except ValueError:
                out.append(path.name)
    return sorted(out)


def unseen(files: list[WeekFile], seen: dict[str, str]) -> list[WeekFile]:
    """Files not in ``seen`` (name -> fingerprint) or whose fingerprint changed."""
    return [f for f in files if seen.get(f.name) != f.fingerprint]


def settled(files: list[WeekFile], settle_seconds: float, now: float) -> list[WeekFile]:
    """Files not modified within the last ``settle_seconds`` (a copy in progress is not)."""
    return [f for f in files if now - f.modified >= settle_seconds]
