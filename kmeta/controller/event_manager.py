"""ControllerEventManager: events are queued and processed one at a time by a single task.

Processing is synchronous (state change, durable commit, requests enqueued on the channel
manager); anything that must wait for brokers (the propagation barrier) resolves later via
request callbacks, so a slow broker never stalls the event loop. Queue size and each event's
queue and processing times are measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Protocol

from kmeta.controller.metrics import ControllerMetrics

log = logging.getLogger(__name__)


class ControllerEvent(Protocol):
    name: str

    def process(self) -> None: ...

    def fail(self, exc: BaseException) -> None:
        """Called instead of process() when the manager shuts down, or after process() raised."""


class ControllerEventManager:
    def __init__(self, metrics: ControllerMetrics, on_processed: object = None) -> None:
        self._queue: asyncio.Queue[tuple[ControllerEvent, float]] = asyncio.Queue()
        self._metrics = metrics
        self._task: asyncio.Task[None] | None = None
        #: hook(event, queue_s, process_s) called after each event (used for the state log)
        self.on_processed = on_processed

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="controller-events")

    def put(self, event: ControllerEvent) -> None:
        self._queue.put_nowait((event, time.monotonic()))
        self._metrics.event_queue_size.set(self._queue.qsize())

    @property
    def queue_size(self) -> int:
        return self._queue.qsize()

    async def _run(self) -> None:
        while True:
            event, enqueued = await self._queue.get()
            self._metrics.event_queue_size.set(self._queue.qsize())
            start = time.monotonic()
            queue_s = start - enqueued
            self._metrics.event_queue_time_ms.observe(queue_s * 1000)
            try:
                event.process()
            except Exception as exc:  # a bug in one event must not stop the controller
                log.exception("controller event %s failed", event.name)
                event.fail(exc)
            process_s = time.monotonic() - start
            self._metrics.event_process_time_ms.labels(event.name).observe(process_s * 1000)
            if callable(self.on_processed):
                self.on_processed(event, queue_s, process_s)
            # let senders and connections run between events
            await asyncio.sleep(0)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        while not self._queue.empty():
            event, _ = self._queue.get_nowait()
            event.fail(ConnectionAbortedError("controller shutting down"))
