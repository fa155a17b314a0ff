"""The project runs on Dagster's public API only, and its model steps stay apart within a run
whatever instance runs it (D106)."""

import re
import time
from pathlib import Path

import dagster as dg
import pytest

from retailsim_dagster.definitions import STEP_PROCESSES, defs
from retailsim_dagster.partitions import CPU_HEAVY

ROOT = Path(__file__).resolve().parents[2]
# Built from parts so that this file does not match itself.
PRIVATE = re.compile(r"\bdagster" + r"\._")


def test_no_file_of_the_project_names_a_private_dagster_module():
    files = [
        p
        for folder in ("retailsim_core", "retailsim_dagster", "retailsim_serve", "benchmarks")
        for p in (ROOT / folder).rglob("*.py")
    ]
    files += list((ROOT / "tests").rglob("*.py")) + list(ROOT.glob("*.yaml"))
    files += list((ROOT / "deploy").glob("*.yaml"))
    hits = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in files
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if PRIVATE.search(line)
    ]
    assert len(files) > 100 and hits == []


def test_the_guard_finds_a_private_import():
    assert PRIVATE.search("from dagster" + "._core.events import DagsterEvent")
    assert not PRIVATE.search("import dagster as dg; dg.multiprocess_executor")


def test_the_executor_is_dagsters_own():
    job = defs.resolve_job_def("__ASSET_JOB")
    assert job.executor_def.name == "multiprocess"
    config = defs.executor.config_schema.resolve_config({}).value["config"]
    assert config["tag_concurrency_limits"] == [
        {"key": "retailsim/cpu", "value": "heavy", "limit": 1}
    ]


def _sleep(name: str, tags: dict) -> dg.OpDefinition:
    @dg.op(name=name, tags=tags)
    def step() -> None:
        time.sleep(1.5)

    return step


def three_steps() -> dg.JobDefinition:
    """Two heavy steps and a light one, none depending on another, under the project's
    executor settings (forkserver without the project's preloads: this job needs none)."""

    @dg.graph
    def steps():
        _sleep("heavy_a", CPU_HEAVY)()
        _sleep("heavy_b", CPU_HEAVY)()
        _sleep("light", {})()

    settings = {**STEP_PROCESSES, "start_method": {"forkserver": {}}}
    return steps.to_job(
        name="three_steps", executor_def=dg.multiprocess_executor.configured(settings)
    )


def _spans(instance, run_id: str) -> dict[str, tuple[float, float]]:
    def times(kind):
        return {e.step_key: e.timestamp for e in instance.all_logs(run_id, of_type=kind)}

    start = times(dg.DagsterEventType.STEP_START)
    end = times(dg.DagsterEventType.STEP_SUCCESS)
    return {step: (start[step], end[step]) for step in start}


@pytest.mark.slow
def test_heavy_steps_run_one_at_a_time_on_an_instance_without_the_projects_pools(tmp_path):
    """A fresh instance (no dagster.yaml: no pool limit) still runs the heavy steps apart, while
    the executor's second slot runs the light step beside one of them."""
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = dg.execute_job(dg.reconstructable(three_steps), instance=instance)
        assert result.success
        spans = _spans(instance, result.run_id)
    (a0, a1), (b0, b1) = spans["heavy_a"], spans["heavy_b"]
    assert a1 <= b0 or b1 <= a0  # never both at once
    light0, light1 = spans["light"]
    assert any(light0 < end and start < light1 for start, end in (spans["heavy_a"], (b0, b1)))


def test_the_forkserver_freezes_what_it_preloaded_last():
    """The last preload freezes the forkserver's objects out of the cyclic collector, so steps
    forked from it never walk them (D106); nothing else imports it."""
    import subprocess
    import sys

    assert STEP_PROCESSES["start_method"]["forkserver"]["preload_modules"][-1] == (
        "retailsim_dagster.step_preload"
    )
    code = "import gc, retailsim_dagster.step_preload; print(gc.get_freeze_count())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) > 1000
    users = [
        p
        for p in (ROOT / "retailsim_dagster").rglob("*.py")
        if "import step_preload" in p.read_text()
    ]
    assert users == []
