"""What the app keeps between requests: the current service, swapped when a newer checkpoint is
published, and the micro-batcher that scores concurrent next-basket requests in one forward.

Reload without dropped requests: a request reads ``holder.service`` once and keeps that object
to the end; a reload builds the new service completely on a background thread and only then
replaces the reference (one assignment), so requests in flight finish on the old model and
later ones start on the new one.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from pathlib import Path

from retailsim_core.serving.service import Context, WorldModelService
from retailsim_core.settings import Settings, load_settings
from retailsim_core.training.checkpoint import verified_id

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
    """The current ``WorldModelService`` and its reload from the checkpoint's manifest."""

    def __init__(self, load: Callable[[], WorldModelService], checkpoint: Path):
        self._load, self.checkpoint = load, checkpoint
        self.service = load()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.reloads = 0

    def reload_if_new(self) -> bool:
        """Load and swap in the checkpoint when its verified id differs from the one served."""
        with self._lock:
            new_id = verified_id(self.checkpoint)
            if new_id is None or new_id == self.service.checkpoint_id:
                return False
            try:
                fresh = self._load()
            except Exception:  # a bad checkpoint must not take the running service down
                log.exception(
                    "reload of checkpoint %s failed; still serving %s",
                    new_id,
                    self.service.checkpoint_id,
                )
                return False
            self.service = fresh  # the swap: one reference assignment
            self.reloads += 1
            log.info("now serving checkpoint %s", fresh.checkpoint_id)
            return True

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
