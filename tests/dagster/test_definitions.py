import dagster as dg
import pytest

from retailsim_dagster.definitions import defs
from retailsim_dagster.partitions import weekly_partitions


def test_definitions_load():
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert {"raw_transactions", "raw_transactions_quarantine"} <= keys
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        if node.partitions_def is not None:
            assert node.partitions_def == weekly_partitions
        # `make demo` materializes '*' over a partition range, which the CLI runs only when
        # every selected asset, partitioned or not, backfills in a single run.
        assert node.backfill_policy == dg.BackfillPolicy.single_run(), key


def test_weekly_partitions_are_the_117_lgsr_weeks():
    keys = weekly_partitions.get_partition_keys()
    assert len(keys) == 117 and keys[0] == "2006-04-10" and keys[-1] == "2008-06-30"


@pytest.mark.slow
def test_dg_cli_loads_the_project():
    """`dg check defs` from the repo root, as documented."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    dg_bin = Path(sys.executable).with_name("dg")
    env = {**os.environ, "DAGSTER_HOME": str(root / "data" / "dagster_home")}
    out = subprocess.run(
        [str(dg_bin), "check", "defs"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "All definitions loaded successfully" in out.stdout + out.stderr


def test_local_scale_out_settings():
    """Multiprocess executor capped at the machine's 2 cores; the model steps share one pool,
    the data stage runs two steps at once outside it (D98)."""
    import yaml

    assert defs.executor.name == "multiprocess"
    config = defs.executor.config_schema.resolve_config({}).value["config"]
    assert config["max_concurrent"] == 2
    preload = config["start_method"]["forkserver"]["preload_modules"]
    assert preload[0] == "retailsim_dagster.definitions"  # steps fork, never re-import torch
    graph = defs.resolve_asset_graph()
    model = {"trained_checkpoint", "holdout_checkpoint", "evaluation_report", "pricing_policy"}
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        if node.group_name != "model":
            assert not node.pools, key  # deterministic data steps: two at once
        elif key.to_user_string() in model:
            assert node.pools == {"cpu_heavy"}, key
        if node.pools:  # the executor keeps the pool's steps of one run apart, too
            assert defs.get_assets_def(key).op.tags["retailsim/cpu"] == "heavy", key
    chain = ("derived_prices", "product_graph", "pseudo_brands", "graphsage_embeddings")
    assert all(defs.get_assets_def(k).op.tags["dagster/priority"] == "2" for k in chain)
    # The baselines' time-budgeted training goes first; the one-core export overlaps evaluation.
    assert graph.get(dg.AssetKey("tuned_baselines")).pools == {"cpu_heavy"}
    assert defs.get_assets_def("tuned_baselines").op.tags["dagster/priority"] == "1"
    assert not graph.get(dg.AssetKey("onnx_scoring_graph")).pools
    # The hold-out check goes after GraphSAGE, in the model pool (D99).
    holdout = next(c for c in defs.asset_checks if "substitution_holdout" in c.op.name)
    assert dg.AssetKey("graphsage_embeddings") in holdout.keys_by_input_name.values()
    assert holdout.op.pool == "cpu_heavy" and holdout.op.tags["dagster/priority"] == "-1"
    assert holdout.op.tags["retailsim/cpu"] == "heavy"
    from pathlib import Path

    instance = yaml.safe_load((Path(__file__).resolve().parents[2] / "dagster.yaml").read_text())
    assert instance["concurrency"]["pools"]["default_limit"] == 1
    assert instance["concurrency"]["runs"]["max_concurrent_runs"] == 2
    assert instance["telemetry"]["enabled"] is False


def test_an_exported_dagster_home_wins_over_the_project_defaults(tmp_path):
    """Neither `.env` (which Dagster's CLI applies over the environment) nor the Makefile may
    replace a DAGSTER_HOME the user exported; without one, the Makefile uses the project's."""
    import os
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    names = [line.split("=")[0].strip() for line in (root / ".env").read_text().splitlines()]
    assert "DAGSTER_HOME" not in names
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    show = ["make", "-s", "--no-print-directory", "-f", "Makefile", "-f", "-", "show-home"]
    rule = "show-home:\n\t@echo $(DAGSTER_HOME)\n"
    mine = subprocess.run(
        show,
        cwd=root,
        input=rule,
        text=True,
        capture_output=True,
        env={**env, "DAGSTER_HOME": str(tmp_path)},
        check=True,
    )
    assert mine.stdout.strip() == str(tmp_path)
    default = subprocess.run(
        show, cwd=root, input=rule, text=True, capture_output=True, env=env, check=True
    )
    assert default.stdout.strip() == str(root / "data" / "dagster_home")


def test_the_dead_run_sweeper_runs_by_default():
    sensor = defs.resolve_sensor_def("dead_run_sweeper")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
