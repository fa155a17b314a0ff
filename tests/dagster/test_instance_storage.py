"""The batched SQLite event log records what Dagster's own SQLite event log records (oracle:
the same run on an instance of each), and the project's dagster.yaml uses it."""

import shutil
import textwrap
from pathlib import Path

import dagster as dg
import pytest

from retailsim_dagster import instance_storage
from retailsim_dagster.instance_storage import BatchedSqliteEventLog

ROOT = Path(__file__).resolve().parents[2]
WEEKS = dg.WeeklyPartitionsDefinition(start_date="2024-01-01", end_offset=0)
SINGLE_RUN = dg.BackfillPolicy.single_run()


@dg.asset(partitions_def=WEEKS, backfill_policy=SINGLE_RUN)
def sales(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"weeks": len(context.partition_keys)})


@dg.asset(partitions_def=WEEKS, backfill_policy=SINGLE_RUN, deps=[sales])
def prices(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"weeks": len(context.partition_keys)})


@dg.asset_check(asset=prices)
def prices_check() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True, metadata={"rows": 3})


STORAGE = {
    "dagster": "storage:\n  sqlite:\n    base_dir: {home}\n",
    "batched": textwrap.dedent("""\
        storage:
          custom:
            module: retailsim_dagster.instance_storage
            class: SqliteStorage
            config:
              base_dir: {home}
        """),
}


def _record(home: Path, storage: str) -> dict:
    """What the instance at ``home`` recorded of one run over six weeks."""
    home.mkdir()
    (home / "dagster.yaml").write_text(STORAGE[storage].format(home=home))
    keys = WEEKS.get_partition_keys()[:6]
    tags = {
        "dagster/asset_partition_range_start": keys[0],
        "dagster/asset_partition_range_end": keys[-1],
    }
    with dg.DagsterInstance.from_config(str(home)) as instance:
        result = dg.materialize([sales, prices, prices_check], instance=instance, tags=tags)
        assert result.success
        logs = instance.all_logs(result.run_id)
        check = instance.event_log_storage.get_asset_check_execution_history(
            prices_check.check_key, limit=10
        )
        return {
            "events": [
                (
                    e.dagster_event_type,
                    e.step_key,
                    e.dagster_event.asset_key,
                    e.dagster_event.partition,
                )
                for e in logs
                if e.is_dagster_event
            ],
            "materialized": {
                key: instance.get_materialized_partitions(key) for key in (sales.key, prices.key)
            },
            "tags": {  # the data versions differ from run to run: their names and number
                key: sorted(sorted(t) for t in instance.get_event_tags_for_asset(key))
                for key in (sales.key, prices.key)
            },
            "latest": instance.get_latest_materialization_event(prices.key).dagster_event.partition,
            "planned": sorted(
                e.dagster_event.partition
                for e in logs
                if e.dagster_event_type == dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED
            ),
            "check": [(c.status.value, type(c.evaluation).__name__) for c in check],
            "storage": type(instance.event_log_storage).__name__,
        }


def test_batched_event_log_records_what_dagsters_records(tmp_path, monkeypatch):
    batches = []
    store_batch = BatchedSqliteEventLog.store_event_batch

    def spy(self, events):
        batches.append(len(events))
        store_batch(self, events)

    monkeypatch.setattr(BatchedSqliteEventLog, "store_event_batch", spy)
    ours = _record(tmp_path / "batched", "batched")
    theirs = _record(tmp_path / "dagster", "dagster")
    assert ours.pop("storage") == "BatchedSqliteEventLog"
    assert theirs.pop("storage") == "SqliteEventLogStorage"
    assert ours == theirs
    assert len(ours["planned"]) == 12 and all(len(p) == 6 for p in ours["materialized"].values())
    assert ours["check"][0] == ("SUCCEEDED", "AssetCheckEvaluation")
    # The run's planned events went as one batch, each step's six materializations as one.
    assert max(batches) >= 12 and batches.count(6) == 2


def test_a_batch_of_other_events_is_written_one_by_one(tmp_path):
    """Run status changes (never batched by Dagster) keep Dagster's own write path."""
    log = BatchedSqliteEventLog(str(tmp_path))
    event = dg.EventLogEntry(
        error_info=None,
        level=10,
        user_message="",
        run_id="r",
        timestamp=1.0,
        dagster_event=dg.DagsterEvent(
            event_type_value=dg.DagsterEventType.RUN_START.value, job_name="j"
        ),
    )
    log.store_event_batch([event, event])
    assert [e.dagster_event_type for e in log.get_logs_for_run("r")] == [
        dg.DagsterEventType.RUN_START
    ] * 2
    log.dispose()


def test_the_project_instance_uses_the_batched_event_log(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert isinstance(instance.event_log_storage, BatchedSqliteEventLog)
        assert (home / "history" / "runs" / "index.db").exists()  # Dagster's own layout
    assert int(instance_storage.os.environ[instance_storage.BATCH_SIZE_VARIABLE]) > 0


@pytest.fixture(autouse=True)
def _batching(monkeypatch):
    """The module sets the variable on import; each test sees it as a run would."""
    monkeypatch.setenv(instance_storage.BATCH_SIZE_VARIABLE, "10000")
