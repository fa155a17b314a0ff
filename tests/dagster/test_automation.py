"""The weekly schedule and the new-week-file sensor."""

import json
import os
import shutil
import time

import dagster as dg
import pytest

from retailsim_core.storage.warehouse import Warehouse
from retailsim_dagster.automation import new_week_file_sensor, weekly_refresh_schedule
from retailsim_dagster.definitions import defs
from retailsim_dagster.resources import PipelineConfigResource, RawSourceResource, WarehouseResource


def _copy(tiny_dataset, raw, *names):
    raw.mkdir(exist_ok=True)
    for name in names:
        shutil.copy(tiny_dataset["raw"] / name, raw / name)
        _settle(raw / name)


def _settle(path, ago=60.0):
    """As if the file was last written ``ago`` seconds ago (past the settle time)."""
    then = time.time() - ago
    os.utime(path, (then, then))


def _requests(result):
    return [] if isinstance(result, dg.SkipReason) else sorted(r.partition_key for r in result)


def test_sensor_requests_each_new_file_once(tiny_dataset, tmp_path):
    raw = tmp_path / "raw"
    _copy(tiny_dataset, raw, "transactions_200607.csv", "transactions_200609.csv")
    resources = {"raw_source": RawSourceResource(raw_dir=str(raw))}
    ctx = dg.build_sensor_context(resources=resources)
    assert _requests(new_week_file_sensor(ctx)) == ["2006-04-10", "2006-04-24"]
    ctx = dg.build_sensor_context(cursor=ctx.cursor, resources=resources)
    assert isinstance(new_week_file_sensor(ctx), dg.SkipReason)  # processed once
    _copy(tiny_dataset, raw, "transactions_200608.csv")
    ctx = dg.build_sensor_context(cursor=ctx.cursor, resources=resources)
    assert _requests(new_week_file_sensor(ctx)) == ["2006-04-17"]  # exactly the new week
    (raw / "transactions_200607.csv").write_text(
        (raw / "transactions_200607.csv").read_text() + "\n"
    )
    _settle(raw / "transactions_200607.csv", ago=30.0)
    ctx = dg.build_sensor_context(cursor=ctx.cursor, resources=resources)
    assert _requests(new_week_file_sensor(ctx)) == ["2006-04-10"]  # a replaced file runs again
    assert set(json.loads(ctx.cursor)) == {
        "transactions_200607.csv",
        "transactions_200608.csv",
        "transactions_200609.csv",
    }
    (raw / "transactions_200608.csv").unlink()
    _copy(tiny_dataset, raw, "transactions_200611.csv")
    ctx = dg.build_sensor_context(cursor=ctx.cursor, resources=resources)
    assert _requests(new_week_file_sensor(ctx)) == ["2006-05-08"]
    assert "transactions_200608.csv" not in json.loads(ctx.cursor)  # gone: out of the cursor


def test_sensor_waits_for_a_file_being_copied(tiny_dataset, tmp_path):
    """A file modified within the settle time may still be growing: no run until it settles,
    then exactly one."""
    raw = tmp_path / "raw"
    _copy(tiny_dataset, raw, "transactions_200607.csv")
    resources = {"raw_source": RawSourceResource(raw_dir=str(raw))}
    ctx = dg.build_sensor_context(resources=resources)
    assert _requests(new_week_file_sensor(ctx)) == ["2006-04-10"]
    text = (tiny_dataset["raw"] / "transactions_200608.csv").read_text()
    (raw / "transactions_200608.csv").write_text(text[: len(text) // 3])  # half copied
    ctx = dg.build_sensor_context(cursor=ctx.cursor, resources=resources)
    skip = new_week_file_sensor(ctx)
    assert isinstance(skip, dg.SkipReason) and "1 still changing" in skip.skip_message
    (raw / "transactions_200608.csv").write_text(text)
    _settle(raw / "transactions_200608.csv")
    ctx = dg.build_sensor_context(cursor=ctx.cursor, resources=resources)
    assert _requests(new_week_file_sensor(ctx)) == ["2006-04-17"]
    ctx = dg.build_sensor_context(cursor=ctx.cursor, resources=resources)
    assert isinstance(new_week_file_sensor(ctx), dg.SkipReason)


def test_sensor_ignores_other_files(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "transactions_209901.csv").write_text("x")  # outside the LGSR calendar
    ctx = dg.build_sensor_context(
        resources={"raw_source": RawSourceResource(raw_dir=str(tmp_path))}
    )
    skip = new_week_file_sensor(ctx)
    assert isinstance(skip, dg.SkipReason)
    assert "outside the calendar: transactions_209901.csv" in skip.skip_message
    assert "notes.txt" not in skip.skip_message


def test_schedule_requests_the_newest_week(tiny_dataset, tmp_path):
    raw = tmp_path / "raw"
    resources = {"raw_source": RawSourceResource(raw_dir=str(raw))}
    raw.mkdir()
    assert isinstance(
        weekly_refresh_schedule(dg.build_schedule_context(resources=resources)), dg.SkipReason
    )
    _copy(tiny_dataset, raw, "transactions_200607.csv", "transactions_200611.csv")
    request = weekly_refresh_schedule(dg.build_schedule_context(resources=resources))
    assert request.partition_key == "2006-05-08" and request.run_key.startswith(
        "transactions_200611.csv:"
    )


@pytest.mark.slow
def test_weekly_job_refreshes_one_week_through_the_graph(tiny_dataset, tmp_path):
    resources = {
        "raw_source": RawSourceResource(raw_dir=str(tiny_dataset["raw"])),
        "warehouse": WarehouseResource(root=str(tmp_path / "wh")),
        "pipeline_config": PipelineConfigResource(),
    }
    job = defs.resolve_job_def("weekly_refresh")
    for key in ("2006-04-10", "2006-04-17"):
        assert job.execute_in_process(partition_key=key, resources=resources).success
    wh = Warehouse(tmp_path / "wh")
    for table in (
        "raw_transactions",
        "derived_prices",
        "customer_store_affinity",
        "store_features",
    ):
        assert wh.weeks(table) == [1, 2], table
    assert os.path.exists(wh.partition_dir("mission_patterns", 2))


def test_retraining_policy_reevaluates_after_a_new_checkpoint():
    """evaluation_report follows every new trained_checkpoint (and tuned_baselines); both
    retrain on the weekly cron.
    """
    import dagster as dg

    from retailsim_dagster.assets import model
    from retailsim_dagster.definitions import defs

    graph = defs.resolve_asset_graph()
    ckpt = graph.get(dg.AssetKey("trained_checkpoint")).automation_condition
    assert ckpt is not None and "0 6 * * 1" in str(ckpt.get_label() or ckpt)
    tuned = graph.get(dg.AssetKey("tuned_baselines")).automation_condition
    assert tuned is not None and "0 6 * * 1" in str(tuned.get_label() or tuned)
    assert defs.resolve_sensor_def("model_retraining_sensor") is not None
    instance = dg.DagsterInstance.ephemeral()
    from retailsim_dagster.resources import default_resources

    assets = dg.Definitions(
        assets=[model.trained_checkpoint, model.tuned_baselines, model.evaluation_report],
        resources=default_resources(),
    )
    instance.report_runless_asset_event(dg.AssetMaterialization("tuned_baselines"))
    first = dg.evaluate_automation_conditions(defs=assets, instance=instance)
    assert first.total_requested == 0  # no checkpoint yet: nothing to evaluate
    instance.report_runless_asset_event(dg.AssetMaterialization("trained_checkpoint"))
    second = dg.evaluate_automation_conditions(defs=assets, instance=instance, cursor=first.cursor)
    assert second.get_requested_partitions(dg.AssetKey("evaluation_report")) == {None}
    assert (
        second.get_num_requested(dg.AssetKey("trained_checkpoint")) == 0
    )  # waits for its cron tick
    instance.report_runless_asset_event(dg.AssetMaterialization("evaluation_report"))
    third = dg.evaluate_automation_conditions(defs=assets, instance=instance, cursor=second.cursor)
    assert third.total_requested == 0  # evaluated: nothing new
    instance.report_runless_asset_event(dg.AssetMaterialization("tuned_baselines"))
    fourth = dg.evaluate_automation_conditions(defs=assets, instance=instance, cursor=third.cursor)
    assert fourth.get_requested_partitions(dg.AssetKey("evaluation_report")) == {None}
