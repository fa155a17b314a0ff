"""Weekly operation: a schedule for the newest week and a sensor for new week files."""

import json
import time

import dagster as dg

from retailsim_core.calendar import week_key_of
from retailsim_core.ingest.raw_files import list_week_files, outside_calendar, settled, unseen
from retailsim_core.tables import (
    AFFINITY_TABLE,
    METADATA_TABLE,
    MISSIONS_TABLE,
    PRICES_TABLE,
    QUARANTINE_TABLE,
    RAW_TABLE,
    REFRESH_TABLE,
    SAMPLES_TABLE,
    STORE_FEATURES_TABLE,
    TRIPS_TABLE,
)
from retailsim_dagster.resources import RawSourceResource

# Every weekly asset, from ingestion to features: what a new week of data refreshes.
weekly_job = dg.define_asset_job(
    "weekly_refresh",
    selection=dg.AssetSelection.assets(
        RAW_TABLE,
        QUARANTINE_TABLE,
        PRICES_TABLE,
        AFFINITY_TABLE,
        MISSIONS_TABLE,
        STORE_FEATURES_TABLE,
        METADATA_TABLE,
        TRIPS_TABLE,
        SAMPLES_TABLE,
        REFRESH_TABLE,  # the model refreshed with the new week (D111)
    ),
    description="Materialize one shop week through every weekly asset, the model's refresh "
    "included (weekly partitions, inferred).",
)


@dg.schedule(
    job=weekly_job,
    cron_schedule="0 6 * * 1",
    execution_timezone="Europe/London",
    default_status=dg.DefaultScheduleStatus.STOPPED,
)
def weekly_refresh_schedule(context: dg.ScheduleEvaluationContext, raw_source: RawSourceResource):
    """Mondays 06:00: refresh the newest week whose file is in the raw directory. The run key
    includes the file's fingerprint, so a week is run once per version of its file."""
    files = list_week_files(raw_source.path)
    if not files:
        ignored = _outside_calendar(context, raw_source)
        return dg.SkipReason(f"no transactions_YYYYWW.csv[.gz] in {raw_source.path}{ignored}")
    newest = files[-1]
    return dg.RunRequest(
        run_key=f"{newest.name}:{newest.fingerprint}",
        partition_key=week_key_of(newest.week),
        tags={"retailsim/source_file": newest.name},
    )


# A tick lists one folder (milliseconds), and a week's file should become a served model within
# three minutes of landing (issue #62): a tick's wait is part of that, so ticks are frequent.
SENSOR_SECONDS = 15


@dg.sensor(
    job=weekly_job,
    minimum_interval_seconds=SENSOR_SECONDS,
    default_status=dg.DefaultSensorStatus.STOPPED,
)
def new_week_file_sensor(context: dg.SensorEvaluationContext, raw_source: RawSourceResource):
    """Requests exactly the partition of each new (or replaced) week file. The cursor maps file
    name -> fingerprint, so each version of a file is processed once. A file modified within
    the settle time is left for a later tick (it may still be being copied; D83)."""
    seen = json.loads(context.cursor) if context.cursor else {}
    listed = list_week_files(raw_source.path)
    files = settled(listed, raw_source.read_limits.settle_seconds, time.time())
    fresh = unseen(files, seen)
    ignored = _outside_calendar(context, raw_source)
    if not fresh:
        growing = len(listed) - len(files)
        return dg.SkipReason(f"no new week files ({growing} still changing){ignored}")
    # The files listed now: a settled one at its fingerprint, a changing one as last seen (a
    # file gone from the folder leaves the cursor, so its return is a new file).
    cursor = {f.name: seen[f.name] for f in listed if f.name in seen}
    cursor |= {f.name: f.fingerprint for f in files}
    context.update_cursor(json.dumps(cursor, sort_keys=True))
    return [
        dg.RunRequest(
            run_key=f"{f.name}:{f.fingerprint}",
            partition_key=week_key_of(f.week),
            tags={"retailsim/source_file": f.name},
        )
        for f in fresh
    ]


def _outside_calendar(context, raw_source: RawSourceResource) -> str:
    """Week files of no calendar week are never ingested: said in the tick's log and its skip
    reason, never silently ignored (D113)."""
    names = outside_calendar(raw_source.path)
    if not names:
        return ""
    text = f"; not ingested, outside the calendar: {', '.join(names)}"
    context.log.warning(f"{raw_source.path}{text}")
    return text
