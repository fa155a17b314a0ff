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
"""

from __future__ import annotations

import contextlib
import queue
import time
import weakref

import dagster as dg
from dagster._core.definitions.executor_definition import (
    MULTI_PROC_CONFIG,
    multiple_process_executor_requirements,
)
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext
from dagster._core.execution.retries import RetryMode
from dagster._core.execution.step_dependency_config import StepDependencyConfig
from dagster._core.executor import child_process_executor as child
from dagster._core.executor.multiprocess import MultiprocessExecutor


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


class PromptMultiprocessExecutor(MultiprocessExecutor):
    def execute(self, plan_context, execution_plan):
        with prompt_polling(), prompt_claims():
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
