"""Dagster's multiprocess executor with a parent that drains a step's events as they come.

Why: the executor's loop takes one event from each running step per pass, and a step with no
event waiting blocks the pass for ``TICK`` (20 ms). A partitioned step ends with a burst of
events (one materialization per week and output: ``training_data`` yields ~570 on the real
sample), so beside a quiet step (GraphSAGE trains without events) the parent read ~50 events a
second, and the finished step's process held its executor slot for 2-7 s (measured on the
real sample) while its queue emptied. Here a quiet step's poll returns at once while another
step's queue holds events, and otherwise waits up to ``TICK`` in 2-ms slices, looking at the
other queues between them: the loop still waits when every step is quiet. Steps, events and
their order per step are Dagster's own.

A step waiting for a pool slot (``dagster/pool``) asks again after a back-off that grows to
15 s, so the model steps of a whole-graph run, one at a time in ``cpu_heavy``, each started
8-10 s after the previous one ended (four such waits in ``make demo``). Here a step of the run
freeing its slot makes the run's waiting claims due at once; a slot freed by another run is
still noticed at Dagster's back-off.

Both are swapped in for the span of :meth:`PromptMultiprocessExecutor.execute` only. They
replace ``child_process_executor._poll_for_event`` and wrap
``InstanceConcurrencyContext.free_step``, private parts of the pinned Dagster
(tests/dagster/test_executor.py runs the same job under both executors).

Steps fork from the run's own process where that gives them what a forkserver child gets
(:func:`fork_is_safe`, D105): the forkserver re-imports the definitions before the first step
starts, ~4 s of one core at every run's start that the run's process has already spent.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing.util
import os
import queue
import signal
import sys
import time
import weakref
from pathlib import Path

import dagster as dg
from dagster._core.definitions.executor_definition import (
    MULTI_PROC_CONFIG,
    multiple_process_executor_requirements,
)
from dagster._core.events import DagsterEvent, EngineEventData
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext
from dagster._core.execution.retries import RetryMode
from dagster._core.execution.step_dependency_config import StepDependencyConfig
from dagster._core.executor import child_process_executor as child
from dagster._core.executor.multiprocess import MultiprocessExecutor
from dagster._utils.interrupts import pop_captured_interrupt


class PromptPoll:
    """``_poll_for_event(process, event_queue)`` that returns at once, with no event, while
    another step's queue holds events, and otherwise waits up to ``tick`` for this step's
    next event in slices of ``slice_s``, looking at the other queues between slices."""

    def __init__(self, tick: float = child.TICK, slice_s: float = 0.002):
        self.tick, self.slice_s = tick, slice_s
        self.queues: weakref.WeakSet = weakref.WeakSet()  # every step queue polled so far

    def __call__(self, process, event_queue):
        self.queues.add(event_queue)
        deadline = time.monotonic() + self.tick
        while True:
            try:
                return event_queue.get(block=False)
            except queue.Empty:
                pass
            if self._others_waiting(event_queue):
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                return event_queue.get(timeout=min(self.slice_s, left))
            except queue.Empty:
                continue
        if process.is_alive():
            return None
        try:  # as Dagster's: the process may have sent an event just before it ended
            return event_queue.get(block=False)
        except queue.Empty:
            return child.PROCESS_DEAD_AND_QUEUE_EMPTY

    def _others_waiting(self, mine) -> bool:
        for other in list(self.queues):
            if other is mine:
                continue
            try:
                if not other.empty():
                    return True
            except (OSError, ValueError):  # closed: its step has ended
                self.queues.discard(other)
        return False


@contextlib.contextmanager
def prompt_polling():
    """Dagster's child-process poll replaced by a :class:`PromptPoll` for the block."""
    before = child._poll_for_event
    child._poll_for_event = PromptPoll()
    try:
        yield
    finally:
        child._poll_for_event = before


@contextlib.contextmanager
def prompt_claims():
    """For the block, a slot freed by a step makes its run's waiting pool claims due at once
    (their next ``claim`` asks the storage, instead of waiting out the back-off)."""
    free_step = InstanceConcurrencyContext.free_step

    def free_and_recheck(self: InstanceConcurrencyContext, step_key: str) -> None:
        held = step_key in self._claims
        free_step(self, step_key)
        if held:
            for waiting in self._pending_claims:
                self._pending_timeouts[waiting] = 0.0

    InstanceConcurrencyContext.free_step = free_and_recheck
    try:
        yield
    finally:
        InstanceConcurrencyContext.free_step = free_step


def native_threads() -> frozenset[int] | None:
    """The ids of this process's threads, Python's and native ones (Linux), else None."""
    try:
        return frozenset(int(tid) for tid in os.listdir("/proc/self/task"))
    except (OSError, ValueError):
        return None


# The threads this process runs once the definitions are imported: this module is imported
# after the assets, whose imports (PyTorch, DGL, Polars, NumPy) start some (jemalloc's, BLAS's).
# A forkserver that preloads the definitions has the same ones when it forks a step.
IMPORT_THREADS = native_threads()


def dagster_process(argv: list[str] | None = None) -> bool:
    """True in Dagster's CLI and the run workers it spawns (``dagster asset materialize``,
    ``dagster api ...``): processes that imported the definitions first and ran nothing of
    their own before. A test or a notebook may have started thread pools before the import."""
    argv = sys.argv if argv is None else argv
    main = getattr(sys.modules.get("__main__"), "__spec__", None)
    return bool(argv) and (
        Path(argv[0]).name == "dagster" or getattr(main, "name", "").startswith("dagster.")
    )


def fork_is_safe(
    imported: frozenset[int] | None, now: frozenset[int] | None, launched_by_dagster: bool
) -> bool:
    """Whether a step forked from this process starts as a forkserver's child would: a Dagster
    process on Linux with no thread started since the definitions were imported. A thread pool
    started since (Polars', PyTorch's OpenMP, any Python thread) has threads a child would not
    have, and a child that waited on them would wait forever; locks other threads hold would
    stay held. Otherwise steps start from the forkserver."""
    return launched_by_dagster and imported is not None and now is not None and now <= imported


def _like_a_forkserver_child(_executor) -> None:
    """In a step forked from the run's process, what a forkserver's child starts with: default
    interrupt handlers and no interrupt seen (the run's process captures both signals; the step
    then captures its own, as Dagster's step code does in every child)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    pop_captured_interrupt()


@contextlib.contextmanager
def forked_steps(executor: MultiprocessExecutor):
    """For the block, steps fork from this process: its objects are frozen out of the cyclic
    collector's sight, so that a step's collections do not walk (and copy, writing their
    headers) the run's ~550K inherited objects: measured on the real sample, steps took 10-25%
    more CPU without it. Unfrozen after; the children keep their copy."""
    before = executor._start_method
    executor._start_method = "fork"
    multiprocessing.util.register_after_fork(executor, _like_a_forkserver_child)
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        executor._start_method = before


class PromptMultiprocessExecutor(MultiprocessExecutor):
    def execute(self, plan_context, execution_plan):
        fork = self._start_method == "forkserver" and fork_is_safe(
            IMPORT_THREADS, native_threads(), dagster_process()
        )
        steps_start = forked_steps(self) if fork else contextlib.nullcontext()
        with prompt_polling(), prompt_claims(), steps_start:
            yield DagsterEvent.engine_event(
                plan_context,
                "Steps fork from the run's process (D105)"
                if fork
                else f"Steps start by {self._start_method}",
                EngineEventData(),
            )
            yield from super().execute(plan_context, execution_plan)


@dg.executor(
    name="multiprocess",
    config_schema=MULTI_PROC_CONFIG,
    requirements=multiple_process_executor_requirements(),
)
def prompt_multiprocess_executor(init_context: dg.InitExecutorContext) -> MultiprocessExecutor:
    """Dagster's ``multiprocess_executor`` (same configuration) with :class:`PromptPoll`."""
    config = init_context.executor_config
    start_method, start_cfg = next(iter((config.get("start_method") or {None: {}}).items()))
    return PromptMultiprocessExecutor(
        max_concurrent=config.get("max_concurrent"),
        tag_concurrency_limits=config.get("tag_concurrency_limits"),
        retries=RetryMode.from_config(config["retries"]),
        start_method=start_method,
        explicit_forkserver_preload=(start_cfg or {}).get("preload_modules"),
        step_dependency_config=StepDependencyConfig.from_config(
            config.get("step_dependency_config")
        ),
    )
