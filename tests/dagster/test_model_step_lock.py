"""Every time-budgeted model step holds the warehouse's model-step lock (D113), so an instance
without the project's dagster.yaml (no ``cpu_heavy`` pool) still runs them one at a time."""

import ast
import multiprocessing as mp
import shutil
import time
from pathlib import Path

import dagster as dg
import pytest

from retailsim_core.storage.locks import exclusive
from retailsim_dagster.definitions import defs
from retailsim_dagster.partitions import CPU_POOL
from retailsim_dagster.resources import (
    MODEL_STEP_LOCK,
    PipelineConfigResource,
    WarehouseResource,
)

ASSETS = Path(__file__).resolve().parents[2] / "retailsim_dagster" / "assets"
POOLED = ("CPU_POOL", "FITTED_ON_INPUTS", "JUDGES_CHECKPOINT", "FORECAST_STEP")


def _pooled_functions() -> dict[str, bool]:
    """Function name -> whether its body takes the lock, for every asset or check whose
    decorator puts it in the model pool."""
    out = {}
    for path in ASSETS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            decorators = " ".join(ast.unparse(d) for d in node.decorator_list)
            if any(name in decorators for name in POOLED):
                out[node.name] = "model_step(context)" in ast.unparse(node)
    return out


def test_every_step_of_the_model_pool_holds_the_lock():
    pooled = _pooled_functions()
    in_pool = {
        node.key.to_user_string()
        for node in defs.resolve_asset_graph().asset_nodes
        if node.pools == {CPU_POOL}
    }
    assert len(pooled) >= 7 and in_pool <= set(pooled) | {"tuned_baselines"}
    assert [name for name, locked in pooled.items() if not locked] == []


def _hold(path, seconds, ready):
    with exclusive(path):
        ready.set()
        time.sleep(seconds)


@pytest.mark.slow
def test_a_model_step_waits_for_another_and_says_so(tiny_warehouse, tiny_checkpoint, tmp_path):
    from retailsim_dagster.assets.refreshed_model import model_refresh

    root = tmp_path / "wh"
    shutil.copytree(tiny_warehouse["warehouse"].root, root)
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold, args=(root / MODEL_STEP_LOCK, 3.0, ready))
    holder.start()
    assert ready.wait(60)
    start = time.perf_counter()
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize(
        [model_refresh],
        partition_key="2006-04-10",  # week 1: a marker before the chain, no training
        resources={
            "warehouse": WarehouseResource(root=str(root)),
            "pipeline_config": PipelineConfigResource(train_end=8, valid_end=11),
        },
        instance=instance,
    )
    waited = time.perf_counter() - start
    holder.join(30)
    assert result.success and waited >= 1.0
    messages = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert any("another model step is running on this warehouse" in m for m in messages)
