"""The one weekly partitioning shared by every weekly asset: the source's weeks (LGSR's 117 shop
weeks by default, The Complete Journey's 53 with RETAILSIM_SOURCE=completejourney)."""

import dagster as dg

from retailsim_core.calendar import SourceCalendar
from retailsim_core.settings import source_calendar


def partitions_of(calendar: SourceCalendar) -> dg.WeeklyPartitionsDefinition:
    return dg.WeeklyPartitionsDefinition(
        start_date=calendar.first_monday.isoformat(),
        end_date=calendar.end.isoformat(),  # exclusive
        day_offset=1,  # weeks start on Monday, like LGSR's
    )


CALENDAR = source_calendar()
weekly_partitions = partitions_of(CALENDAR)


def weeks_of(context: dg.AssetExecutionContext) -> list[int]:
    """The source's weeks (1..117 on LGSR) of the run's partition or partition range; a range
    that holds no week (given end first) is an error, never a green run that did nothing."""
    weeks = [CALENDAR.week_of_key(k) for k in context.partition_keys]
    if not weeks:
        span = context.partition_key_range
        raise ValueError(
            f"the partition range {span.start}...{span.end} holds no week: give its first "
            f"week first ({span.end}...{span.start})"
        )
    return weeks


# The model steps (wall-clock-budgeted training, whole-test-set scoring) share this pool: at
# most `pools.default_limit` (1) of them at once across all runs (dagster.yaml), so a budget is
# never spent beside another model step. The data stage is outside it: its steps are
# deterministic, and two at once (the executor's limit) cut its time by a third (D98).
CPU_POOL = "cpu_heavy"
# The same steps' tag: the executor runs one of them at a time within a run (definitions.py), so
# a step never waits out the pool's back-off behind a step of its own run, and a run on an
# instance without the project's dagster.yaml still keeps its model steps apart.
CPU_HEAVY_LIMIT = {"key": "retailsim/cpu", "value": "heavy"}
CPU_HEAVY = {CPU_HEAVY_LIMIT["key"]: CPU_HEAVY_LIMIT["value"]}
# Steps on the data stage's longest chain (prices -> product graph -> pseudo-brands ->
# GraphSAGE, which every model step waits for): first when an executor slot frees up, before
# the snapshots, features and checks that could run beside them.
CRITICAL_PATH = {"dagster/priority": "2"}


def previous_weeks(n: int) -> dg.TimeWindowPartitionMapping:
    """Week W depends on weeks W-n..W-1 (none exist for the first weeks)."""
    return dg.TimeWindowPartitionMapping(
        start_offset=-n, end_offset=-1, allow_nonexistent_upstream_partitions=True
    )
