"""The prompt multiprocess executor: its poll (fake queues), and a job run under it and under
Dagster's own executor (the same steps and events, its poll in use only during the run)."""

import os
import queue
import time

import dagster as dg
import pytest
from dagster._core.definitions.executor_definition import multiprocess_executor
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext
from dagster._core.executor import child_process_executor as child
from dagster._core.storage.dagster_run import DagsterRun

from retailsim_dagster import executor as prompt
from retailsim_dagster.definitions import STEP_PROCESSES, defs
from retailsim_dagster.executor import PromptPoll, prompt_multiprocess_executor


class FakeQueue:
    """A step's event queue: ``get`` records how long it was allowed to wait."""

    def __init__(self, events=(), closed=False):
        self.events, self.closed, self.waits = list(events), closed, []

    def get(self, block=True, timeout=None):
        self.waits.append(timeout if block else 0.0)
        if self.events:
            return self.events.pop(0)
        raise queue.Empty

    def empty(self):
        if self.closed:
            raise OSError("handle is closed")
        return not self.events


class FakeProcess:
    def __init__(self, alive=True):
        self.alive = alive

    def is_alive(self):
        return self.alive


def test_a_quiet_step_does_not_wait_while_another_steps_events_flow():
    poll, busy, quiet, alive = PromptPoll(), FakeQueue(range(51)), FakeQueue(), FakeProcess()
    got = []
    for _ in range(50):  # the executor's pass: one poll per running step
        got.append(poll(alive, busy))
        assert poll(alive, quiet) is None
    assert got == list(range(50))
    assert quiet.waits == [0.0] * 50  # never a blocking wait while `busy` held events


def test_every_step_quiet_waits_up_to_the_tick_in_slices():
    poll, mine, other = PromptPoll(tick=0.01, slice_s=0.002), FakeQueue(), FakeQueue()
    poll(FakeProcess(), other)
    start = time.monotonic()
    assert poll(FakeProcess(), mine) is None
    assert time.monotonic() - start >= 0.01
    blocking = [w for w in mine.waits if w > 0]
    assert blocking and max(blocking) <= 0.002


def test_a_dead_process_is_drained_then_reported():
    poll, dead = PromptPoll(tick=0.001), FakeProcess(alive=False)
    last = FakeQueue(["last event"])
    assert poll(dead, last) == "last event"
    assert poll(dead, last) == child.PROCESS_DEAD_AND_QUEUE_EMPTY


def test_a_closed_queue_is_forgotten():
    poll, closed = PromptPoll(tick=0.001), FakeQueue(closed=True)
    poll.queues.add(closed)
    assert poll(FakeProcess(), FakeQueue()) is None
    assert closed not in poll.queues


def test_configured_as_dagsters_executor():
    config = {
        "max_concurrent": 2,
        "tag_concurrency_limits": None,
        "retries": {"enabled": {}},
        "start_method": STEP_PROCESSES["start_method"],
        "step_dependency_config": {"require_upstream_step_success": True},
    }

    class Context:  # what both creation functions read
        executor_config = config

    ours = prompt_multiprocess_executor.executor_creation_fn(Context())
    theirs = multiprocess_executor.executor_creation_fn(Context())
    assert isinstance(ours, prompt.PromptMultiprocessExecutor)
    assert vars(ours) == vars(theirs)
    assert defs.resolve_job_def("__ASSET_JOB").executor_def.name == "multiprocess"


@dg.op
def chatty():
    for week in range(40):
        yield dg.AssetMaterialization(asset_key=f"week_{week}")
    yield dg.Output(None)


@dg.op
def quiet():
    time.sleep(0.5)


def dagster_job():
    return dg.JobDefinition(
        name="dagster_job", graph_def=_graph(), executor_def=multiprocess_executor
    )


def prompt_job():
    return dg.JobDefinition(
        name="prompt_job", graph_def=_graph(), executor_def=prompt_multiprocess_executor
    )


def _graph():
    @dg.graph(name="two_steps")
    def two_steps():
        chatty()
        quiet()

    return two_steps


def _events(job_fn, home) -> dict[str, list[str]]:
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        result = dg.execute_job(dg.reconstructable(job_fn), instance=instance)
        assert result.success
        logs = instance.all_logs(result.run_id)
    steps: dict[str, list[str]] = {}
    for entry in logs:
        if entry.is_dagster_event and entry.step_key:
            event = entry.dagster_event
            steps.setdefault(entry.step_key, []).append(
                f"{event.event_type_value} {event.asset_key.to_user_string()}"
                if event.asset_key
                else event.event_type_value
            )
    return steps


def test_a_job_records_the_same_steps_and_events_as_under_dagsters_executor(tmp_path, monkeypatch):
    calls = []
    original = PromptPoll.__call__

    def counted(self, process, event_queue):
        calls.append(1)
        return original(self, process, event_queue)

    monkeypatch.setattr(PromptPoll, "__call__", counted)
    before = child._poll_for_event
    ours = _events(prompt_job, tmp_path / "prompt")
    assert calls  # the run polled through PromptPoll ...
    assert child._poll_for_event is before  # ... and Dagster's poll is back after it
    assert ours == _events(dagster_job, tmp_path / "dagster")
    assert ours["chatty"].count("ASSET_MATERIALIZATION week_39") == 1
    assert set(ours) == {"chatty", "quiet"}


def test_the_poll_is_restored_when_a_run_fails():
    before = child._poll_for_event
    with pytest.raises(RuntimeError), prompt.prompt_polling():
        assert isinstance(child._poll_for_event, PromptPoll)
        raise RuntimeError("a step failed")
    assert child._poll_for_event is before


def _pool_of_one(instance) -> InstanceConcurrencyContext:
    instance.event_log_storage.set_concurrency_slots("cpu", 1)
    return InstanceConcurrencyContext(instance, DagsterRun(job_name="job", run_id="run"))


def test_a_freed_slot_makes_the_runs_waiting_claims_due_at_once():
    with dg.instance_for_test() as instance, _pool_of_one(instance) as pool:
        assert pool.claim("cpu", "train") and not pool.claim("cpu", "evaluate")
        pool.free_step("train")  # Dagster's own: the waiting claim keeps its back-off
        assert not pool.claim("cpu", "evaluate")
        with prompt.prompt_claims():
            pool.free_step("nothing held")  # frees no slot: the back-off stands
            assert not pool.claim("cpu", "evaluate")
    with dg.instance_for_test() as instance, _pool_of_one(instance) as pool:
        assert pool.claim("cpu", "train") and not pool.claim("cpu", "evaluate")
        with prompt.prompt_claims():
            pool.free_step("train")
            assert pool.claim("cpu", "evaluate")  # asked the storage at once, and got it


def test_free_step_is_restored_when_a_run_fails():
    before = InstanceConcurrencyContext.free_step
    with pytest.raises(RuntimeError), prompt.prompt_claims():
        assert InstanceConcurrencyContext.free_step is not before
        raise RuntimeError("a step failed")
    assert InstanceConcurrencyContext.free_step is before


# Run in a fresh interpreter: what the forkserver imports, then a forked step opening the
# instance (Dagster's step process does this first) and naming what it had to import.
STEP_OPENS_INSTANCE = """
import importlib, os, sys
from retailsim_dagster.definitions import STEP_IMPORTS
for name in STEP_IMPORTS:
    importlib.import_module(name)
import dagster as dg
from dagster._core.instance.ref import InstanceRef
ref = InstanceRef.from_dir(sys.argv[1])
before = set(sys.modules)
read, write = os.pipe()
if os.fork() == 0:
    instance = dg.DagsterInstance.from_ref(ref)
    instance.event_log_storage, instance.run_storage, instance.compute_log_manager
    os.write(write, " ".join(sorted(set(sys.modules) - before)).encode() or b"-")
    os._exit(0)
print(os.read(read, 1 << 20).decode())
"""


def test_a_forked_step_opens_the_instance_without_importing(tmp_path):
    """The forkserver's preload holds every module a step imports to open the project's
    instance (D99: ~1 s of CPU per step otherwise)."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    shutil.copy(Path(__file__).resolve().parents[2] / "dagster.yaml", tmp_path / "dagster.yaml")
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", STEP_OPENS_INSTANCE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["-"], f"imported by a step: {out.stdout[:500]}"


def test_fork_only_from_a_dagster_process_with_no_thread_since_the_import():
    imported = frozenset({1, 2, 3})
    assert prompt.fork_is_safe(imported, frozenset({1, 2, 3}), True)
    assert prompt.fork_is_safe(imported, frozenset({1, 2}), True)  # a thread ended
    assert not prompt.fork_is_safe(imported, frozenset({1, 2, 3, 4}), True)  # a pool started
    assert not prompt.fork_is_safe(imported, frozenset({1, 2, 3}), False)  # pytest, a notebook
    assert not prompt.fork_is_safe(None, None, True)  # no /proc: not Linux
    assert prompt.dagster_process(["/venv/bin/dagster", "asset", "materialize"])
    assert not prompt.dagster_process(["/venv/bin/pytest", "tests"])
    assert not prompt.dagster_process()  # this test's own process


def test_the_project_definitions_let_a_dagster_run_fork(tmp_path):
    """Importing the definitions leaves the executor's snapshot holding every thread the imports
    started, so a run from Dagster's CLI forks its steps (an import that started a thread after
    the executor's would make every run take the forkserver's ~4 s start, unnoticed)."""
    import subprocess
    import sys

    code = (
        "import retailsim_dagster.definitions\n"
        "from retailsim_dagster import executor as e\n"
        "print(e.fork_is_safe(e.IMPORT_THREADS, e.native_threads(), True))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"]


def test_a_forked_step_starts_like_a_forkserver_child():
    import signal

    saved = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        prompt._like_a_forkserver_child(None)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGINT, saved[0])
        signal.signal(signal.SIGTERM, saved[1])


def test_forked_steps_freeze_the_heap_for_the_run_only():
    import gc

    executor = prompt_multiprocess_executor.executor_creation_fn(
        type("Context", (), {"executor_config": {"retries": {"enabled": {}}, **STEP_PROCESSES}})
    )
    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError), prompt.forked_steps(executor):
        assert executor._start_method == "fork" and gc.get_freeze_count() > 0
        raise RuntimeError("a step failed")
    assert executor._start_method == "forkserver" and gc.get_freeze_count() == 0


# Two assets whose steps record where they run; a Polars query on its thread pool in each (a
# child of a process whose pool had started would wait on it forever).
TOY_DEFINITIONS = """
import gc, json, os, threading, time
from pathlib import Path

import dagster as dg
import polars as pl

from retailsim_dagster.executor import prompt_multiprocess_executor

if os.environ.get("TOY_THREAD"):  # a thread started after the executor's import
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()


def record(name):
    groups = pl.DataFrame({"a": range(200_000)}).group_by(pl.col("a") % 7).len().height
    out = {"ppid": os.getppid(), "frozen": gc.get_freeze_count(), "groups": groups}
    Path(os.environ["TOY_OUT"], name).write_text(json.dumps(out))


@dg.asset
def first():
    record("first")


@dg.asset(deps=[first])
def second():
    record("second")


defs = dg.Definitions(
    assets=[first, second],
    executor=prompt_multiprocess_executor.configured(
        {"max_concurrent": 2, "start_method": {"forkserver": {}}}
    ),
)
"""


@pytest.mark.parametrize("extra_thread", [False, True])
def test_a_cli_run_forks_its_steps_unless_a_thread_started(tmp_path, extra_thread):
    import json
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "toy.py").write_text(TOY_DEFINITIONS)
    (tmp_path / "home").mkdir()
    (tmp_path / "out").mkdir()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "TOY_OUT": str(tmp_path / "out"),
        "TOY_THREAD": "1" if extra_thread else "",
    }
    cli = Path(sys.executable).parent / "dagster"
    run = subprocess.Popen(
        [str(cli), "asset", "materialize", "-f", str(tmp_path / "toy.py"), "--select", "*"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    log, _ = run.communicate(timeout=300)
    assert run.returncode == 0, log[-3000:]
    steps = [json.loads((tmp_path / "out" / name).read_text()) for name in ("first", "second")]
    assert all(step["groups"] == 7 for step in steps)
    if extra_thread:
        assert "Steps start by forkserver" in log
        assert all(step["ppid"] != run.pid and step["frozen"] == 0 for step in steps)
    else:
        assert "Steps fork from the run's process" in log
        assert all(step["ppid"] == run.pid and step["frozen"] > 0 for step in steps)
