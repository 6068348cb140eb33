"""ControllerEventManager: events are queued and processed one at a time by a single task.

Processing is synchronous (state change, store writes, requests enqueued on the channel
manager); anything that must wait for brokers (the propagation barrier) resolves later via
request callbacks, so a slow broker never stalls the event loop. Queue size and each event's
queue and processing times are measured.

With a ``store``, the events waiting in the queue are processed (one at a time, in order)
and then committed together in a thread (group commit; each event has a savepoint, so a
failing one is undone alone), so the fsync overlaps the requests going out to the brokers;
each event's ``complete()`` (which answers whoever waits on it) runs only once the commit is
durable, and the next events start only then. A crash before the commit loses nothing anyone was told
(brokers may have seen it; the restarted controller's full resync replaces their state).
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

    def complete(self) -> None:
        """Called after process() once its writes are durable: answer the waiters."""

    def fail(self, exc: BaseException) -> None:
        """Called instead of process() when the manager shuts down, or after process() raised."""


#: events committed together at most (group commit)
MAX_GROUP = 256


class DeferredStore(Protocol):
    def begin_deferred(self) -> None: ...

    def end_event(self) -> None: ...

    async def commit_deferred(self) -> None: ...


class ControllerEventManager:
    def __init__(
        self,
        metrics: ControllerMetrics,
        on_processed: object = None,
        store: DeferredStore | None = None,
    ) -> None:
        self._queue: asyncio.Queue[tuple[ControllerEvent, float]] = asyncio.Queue()
        self._metrics = metrics
        self._task: asyncio.Task[None] | None = None
        self._store = store
        self._committing: asyncio.Future[None] | None = None
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
        store = self._store
        while True:
            batch = [await self._queue.get()]
            # Group commit: the events already waiting are processed too (still one at a
            # time, in order), then one commit makes them all durable before any is answered.
            while store is not None and len(batch) < MAX_GROUP and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            self._metrics.event_queue_size.set(self._queue.qsize())
            if store is not None:
                store.begin_deferred()
            failures: list[BaseException | None] = []
            for event, enqueued in batch:
                start = time.monotonic()
                queue_s = start - enqueued
                self._metrics.event_queue_time_ms.observe(queue_s * 1000)
                failure: BaseException | None = None
                try:
                    event.process()
                except Exception as exc:  # a bug in one event must not stop the controller
                    log.exception("controller event %s failed", event.name)
                    failure = exc
                if store is not None:
                    store.end_event()
                failures.append(failure)
                process_s = time.monotonic() - start
                self._metrics.event_process_time_ms.labels(event.name).observe(process_s * 1000)
                if callable(self.on_processed):
                    self.on_processed(event, queue_s, process_s)
            if store is not None:
                self._committing = asyncio.ensure_future(store.commit_deferred())
                try:
                    await asyncio.shield(self._committing)
                except Exception as exc:
                    log.critical("controller events: commit failed", exc_info=exc)
                    failures = [f or exc for f in failures]
                self._committing = None
            for (event, _), failure in zip(batch, failures, strict=True):
                if failure is not None:
                    event.fail(failure)
                else:
                    event.complete()
            # let senders and connections run between events
            await asyncio.sleep(0)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._committing is not None:  # let the store's thread finish before it closes
            with contextlib.suppress(Exception):
                await self._committing
        while not self._queue.empty():
            event, _ = self._queue.get_nowait()
            event.fail(ConnectionAbortedError("controller shutting down"))
