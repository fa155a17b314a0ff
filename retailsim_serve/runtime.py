"""What the app keeps between requests: the current service, swapped when a newer checkpoint is
published, and the micro-batcher that scores concurrent next-basket requests in one forward.

Reload without dropped requests: a request reads ``holder.service`` once and keeps that object
to the end; a reload builds the new service completely on a background thread and only then
replaces the reference (one assignment), so requests in flight finish on the old model and
later ones start on the new one.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import asynccontextmanager
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from pathlib import Path

from retailsim_core.serving.service import Context, WorldModelService
from retailsim_core.settings import Settings, load_settings
from retailsim_core.training.checkpoints.checkpoint import check_manifest

log = logging.getLogger("retailsim_serve")


def _default(name: str):
    return Settings.model_fields[f"serve_{name}"].default


@dataclass(frozen=True)
class ServeSettings:
    """The ``RETAILSIM_SERVE_*`` settings the app reads (field ``x`` is ``Settings.serve_x``);
    the defaults are the settings' defaults."""

    host: str = _default("host")
    port: int = _default("port")
    onnx: bool = _default("onnx")
    max_k: int = _default("max_k")
    max_batch: int = _default("max_batch")
    max_body_bytes: int = _default("max_body_bytes")
    max_simulations: int = _default("max_simulations")
    max_products: int = _default("max_products")
    reload_seconds: int = _default("reload_seconds")
    threads: int = _default("threads")
    max_concurrent: int = _default("max_concurrent")
    max_queued: int = _default("max_queued")

    @classmethod
    def from_settings(cls, settings: Settings) -> ServeSettings:
        return cls(
            **{
                name: getattr(settings, f"serve_{name}")
                for name in (f.name for f in dataclass_fields(cls))
            }
        )

    @classmethod
    def from_env(cls, environ=None) -> ServeSettings:
        return cls.from_settings(load_settings(environ))


class ServiceHolder:
    """The current ``WorldModelService`` and its reload from the checkpoint's manifest.
    ``checkpoint``: the folder, or a function naming the folder to serve now (the newest
    refresh, D111), asked at every check."""

    def __init__(
        self, load: Callable[[], WorldModelService], checkpoint: Path | Callable[[], Path]
    ):
        self._load, self._locate = load, checkpoint if callable(checkpoint) else lambda: checkpoint
        self.service = load()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.reloads = 0
        self._failed: str | None = None  # the id whose load failed: not retried until it changes
        self._noted: str | None = None  # the last refusal logged: each is logged once

    def reload_if_new(self) -> bool:
        """Load and swap in the checkpoint when its verified id differs from the one served.
        A refused or failing checkpoint is logged once with its reason, not at every check,
        and a checkpoint whose load failed is not loaded again until its id changes."""
        with self._lock:
            folder = self._locate()
            verdict = check_manifest(folder)
            new_id = verdict.checkpoint_id
            if new_id is None:
                self._note(f"checkpoint {folder} not loaded: {verdict.reason}")
                return False
            if new_id == self.service.checkpoint_id or new_id == self._failed:
                return False
            try:
                fresh = self._load()
            except Exception as err:  # a bad checkpoint must not take the running service down
                self._failed = new_id
                log.warning(
                    "reload of checkpoint %s failed (%s: %s); still serving %s",
                    new_id,
                    type(err).__name__,
                    err,
                    self.service.checkpoint_id,
                )
                return False
            self.service = fresh  # the swap: one reference assignment
            self.reloads += 1
            self._noted = None
            log.info("now serving checkpoint %s", fresh.checkpoint_id)
            return True

    def _note(self, message: str) -> None:
        if message != self._noted:
            self._noted = message
            log.warning("%s; still serving %s", message, self.service.checkpoint_id)

    def watch(self, seconds: float) -> threading.Thread:
        def loop():
            while not self._stop.wait(seconds):
                self.reload_if_new()

        thread = threading.Thread(target=loop, name="checkpoint-watch", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()


class MicroBatcher:
    """Next-basket requests that arrive together are scored in one batch: one worker thread
    takes everything queued (up to ``max_batch`` contexts), scores it and resolves each
    request's future. With 2 cores, one forward of 8 contexts costs little more than one."""

    def __init__(self, holder: ServiceHolder, max_batch: int):
        self.holder, self.max_batch = holder, max_batch
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="micro-batcher", daemon=True)
        self._thread.start()

    def submit(self, context: Context, k: int) -> Future:
        future: Future = Future()
        self._queue.put((context, k, future))
        return future

    def _run(self) -> None:
        while True:
            items = [self._queue.get()]
            while len(items) < self.max_batch:  # and every request that queued meanwhile
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            service = self.holder.service
            try:
                results = service.recommend([c for c, _, _ in items], max(k for _, k, _ in items))
            except Exception as err:  # each request gets the error, the worker lives on
                for _, _, future in items:
                    future.set_exception(err)
                continue
            for (_, k, future), result in zip(items, results, strict=True):
                future.set_result(
                    {
                        "products": result["products"][:k],
                        "scores": result["scores"][:k],
                        "cold_start": result["cold_start"],
                        "checkpoint_id": service.checkpoint_id,
                    }
                )


class Busy(Exception):
    """Every slot taken and the queue full: answered 503 with Retry-After."""


class Admission:
    """At most ``slots`` heavy requests (simulations, elasticities, batches) compute at once and
    at most ``queued`` more wait for a slot; one more is refused with ``Busy`` at once rather
    than queued behind minutes of work (D82). The event loop and the micro-batcher stay free,
    so /health and single next-basket requests are answered while the slots are busy."""

    def __init__(self, slots: int, queued: int):
        self.slots, self.queued = slots, queued
        self._free = asyncio.Semaphore(slots)
        self._waiting = 0

    @property
    def waiting(self) -> int:
        return self._waiting

    @asynccontextmanager
    async def slot(self):
        if self._free.locked() and self._waiting >= self.queued:
            raise Busy()
        self._waiting += 1
        try:
            await self._free.acquire()
        finally:
            self._waiting -= 1
        try:
            yield
        finally:
            self._free.release()
