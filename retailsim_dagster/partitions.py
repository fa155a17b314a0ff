"""The one weekly partitioning shared by every weekly asset: LGSR's 117 shop weeks."""

import datetime as dt

import dagster as dg

from retailsim_core.calendar import FIRST_MONDAY, N_WEEKS, week_of_key

weekly_partitions = dg.WeeklyPartitionsDefinition(
    start_date=FIRST_MONDAY.isoformat(),
    end_date=(FIRST_MONDAY + dt.timedelta(weeks=N_WEEKS)).isoformat(),  # exclusive
    day_offset=1,  # weeks start on Monday, like LGSR's
)


def weeks_of(context: dg.AssetExecutionContext) -> list[int]:
    """The LGSR weeks (1..117) of the run's partition or partition range."""
    return [week_of_key(k) for k in context.partition_keys]


# Steps that use every core share this concurrency pool: at most `pools.default_limit` of them
# run at once across all runs (dagster.yaml), whatever the executor's parallelism.
CPU_POOL = "cpu_heavy"


def previous_weeks(n: int) -> dg.TimeWindowPartitionMapping:
    """Week W depends on weeks W-n..W-1 (none exist for the first weeks)."""
    return dg.TimeWindowPartitionMapping(
        start_offset=-n, end_offset=-1, allow_nonexistent_upstream_partitions=True
    )
