"""A run killed with SIGKILL holds its cpu_heavy slot; the sweep marks it failed and frees it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dagster as dg
import pytest

from retailsim_dagster.recovery import sweep_dead_runs

ROOT = Path(__file__).resolve().parents[2]

JOB = textwrap.dedent("""
    import sys, time
    import dagster as dg

    @dg.asset(pool="cpu_heavy")
    def heavy():
        time.sleep(float(sys.argv[1]))

    with dg.DagsterInstance.get() as instance:
        dg.materialize([heavy], instance=instance)
""")


def _run(home: Path, seconds: float) -> subprocess.Popen:
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-c", JOB, str(seconds)],
        env=env,
        cwd=home,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _claimed(home: Path) -> list:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return instance.event_log_storage.get_concurrency_info("cpu_heavy").claimed_slots


def _home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")  # the project's pools (limit 1)
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # its storage reads DAGSTER_HOME
    # Create the SQLite storage here, before any run: a run and a poll creating it at once
    # race on the schema's alembic stamp ("more than one head present").
    with dg.DagsterInstance.from_config(str(home)):
        pass
    return home


@pytest.mark.slow
def test_a_killed_run_is_marked_failed_and_its_pool_slot_freed(tmp_path, monkeypatch):
    home = _home(tmp_path, monkeypatch)
    proc = _run(home, 120)
    deadline = time.time() + 90
    while time.time() < deadline and not _claimed(home):
        time.sleep(0.5)
    assert _claimed(home), "the run never claimed its slot"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs()
        assert run.status == dg.DagsterRunStatus.STARTED and _claimed(home)  # the leak, reproduced
        result = sweep_dead_runs(instance)
        assert result.failed_runs == (run.run_id,) and run.run_id in result.freed_runs
        assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE
    assert not _claimed(home)
    later = _run(home, 0)  # the next run gets the slot and ends
    assert later.wait(timeout=120) == 0
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert sum(r.status == dg.DagsterRunStatus.SUCCESS for r in instance.get_runs()) == 1
        assert sweep_dead_runs(instance).failed_runs == ()  # nothing alive is touched


@pytest.mark.slow
def test_a_live_run_is_never_swept(tmp_path, monkeypatch):
    home = _home(tmp_path, monkeypatch)
    proc = _run(home, 60)
    try:
        deadline = time.time() + 90
        while time.time() < deadline and not _claimed(home):
            time.sleep(0.5)
        with dg.DagsterInstance.from_config(str(home)) as instance:
            result = sweep_dead_runs(instance)
            assert result.failed_runs == () and result.freed_runs == ()
        assert _claimed(home)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
