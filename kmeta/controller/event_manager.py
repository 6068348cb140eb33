"""ControllerEventManager: events are queued and processed one at a time by a single task.

Processing is synchronous (state change, store writes, requests enqueued on the channel
manager); anything that must wait for brokers (the propagation barrier) resolves later via
request callbacks, so a slow broker never stalls the event loop. Queue size and each event's
queue and processing times are measured.

With a ``store``, the events waiting in the queue are processed (one at a time, in order)
and then committed together in a thread (group commit; each event has a savepoint, so a
failing one is undone alone). Their effects outside the store wait in the ``outbox`` (the
channel manager, held): only once the commit is durable do the requests go to the brokers
and each event's ``complete()`` answer whoever waits on it; the next events start only then.
A crash before the commit loses nothing anyone was told or sent.

When the commit fails (:class:`StorageError`: disk full, I/O error, read-only file system)
every event of the group that wrote fails with it, and all held effects are dropped; the
events that wrote nothing were refused nothing, so they run again, in a group of their own.
An event that raises is failed alone and its effects dropped. Either way memory may hold
changes the store does not, so ``on_rollback`` runs (the controller reloads its state from
the store) before anyone is answered or the next event runs. The loop goes on, and works
again as soon as the disk does.

:meth:`ControllerEventManager.enqueue` is the controller's one way to queue an event (Kafka's
``ControllerEventManager.put`` handing back a ``QueuedEvent``): its future gets the result
once the event is durable, and only while the controller may answer (:attr:`may_answer`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar, cast

from kmeta.controller.metrics import ControllerMetrics
from kmeta.controller.store.errors import StorageError

log = logging.getLogger(__name__)

T = TypeVar("T")
#: how often a held answer looks whether it may leave (see ControllerEventManager._release)
_HOLD_POLL_S = 0.05


class ControllerEvent(Protocol):
    name: str

    def process(self) -> None: ...

    def complete(self) -> None:
        """Called after process() once its writes are durable: answer the waiters."""

    def fail(self, exc: BaseException) -> None:
        """Called instead of process() when the manager shuts down, or after process() raised."""


#: events committed together at most (group commit)
MAX_GROUP = 256
#: a group takes more of the events waiting only while it has run less than this: the rest
#: wait for the next group, after the loop ran (senders, heartbeats, connections). Without
#: it, a burst (every leader's AlterPartition after a broker stalled, each carrying thousands
#: of partitions) held the loop for the sum of its events.
GROUP_BUDGET_S = 0.05


class DeferredStore(Protocol):
    def begin_deferred(self) -> None: ...

    def end_event(self) -> bool:
        """The current event is done; True if it wrote (opened a savepoint)."""

    async def commit_deferred(self) -> None: ...

    @property
    def group_lost(self) -> bool:
        """The group's commit will fail whatever comes next (its transaction is gone)."""


class Outbox(Protocol):
    """Where events' effects on brokers wait for the commit (the channel manager)."""

    def hold(self) -> None: ...

    def mark(self) -> int: ...

    def discard(self, since: int = 0) -> None: ...

    def release(self) -> None: ...


class QueuedEvent(Generic[T]):
    """A function run as one controller event, its result handed to ``future``."""

    __slots__ = ("fn", "future", "name", "result")

    def __init__(self, name: str, fn: Callable[[], T], future: asyncio.Future[T] | None) -> None:
        self.name = name
        self.fn = fn
        self.future = future
        self.result: T | None = None

    def process(self) -> None:
        self.result = self.fn()

    def complete(self) -> None:
        """The event's writes are durable: answer (never before, see the module docstring)."""
        if self.future is not None and not self.future.done():
            self.future.set_result(cast(T, self.result))  # (set by process() before)

    def fail(self, exc: BaseException) -> None:
        if self.future is not None and not self.future.done():
            self.future.set_exception(exc)


def _observed(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # (retrieved: an unawaited event's failure is not logged twice)


class _Retry(Exception):
    """The outcome of an event that wrote nothing in a group whose commit failed: it is not
    refused (nothing of its own was), it runs again on the reloaded state."""


_RETRY = _Retry()

#: log a failing commit at most this often (the cause stays the same while the disk is full)
COMMIT_FAILURE_LOG_INTERVAL_S = 10.0


class ControllerEventManager:
    def __init__(
        self,
        metrics: ControllerMetrics,
        on_processed: object = None,
        store: DeferredStore | None = None,
        outbox: Outbox | None = None,
        on_rollback: Callable[[], None] | None = None,
    ) -> None:
        self._queue: asyncio.Queue[tuple[ControllerEvent, float]] = asyncio.Queue()
        self._metrics = metrics
        self._task: asyncio.Task[None] | None = None
        self._store = store
        self._committing: asyncio.Future[None] | None = None
        self._outbox = outbox
        self._on_rollback = on_rollback
        self._last_failure_log: float | None = None
        self._failures_not_logged = 0
        self._needs_rollback = False
        #: hook(event, queue_s, process_s) called after each event (used for the state log)
        self.on_processed = on_processed
        #: may an event's answer leave now? (a quorum's controller: while it holds its lease)
        self.may_answer: Callable[[], bool] = lambda: True
        #: set when the controller stops: answers still held are cancelled
        self.stopped = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="controller-events")

    def enqueue(self, name: str, fn: Callable[[], T]) -> asyncio.Future[T]:
        """Queue ``fn`` as the event ``name``: the future gets fn's result once the event's
        writes are durable (or its failure), and only while the controller may answer
        (:meth:`_release`). Nobody need await it: a failure nobody asked for is not reported
        again by asyncio (it was logged here)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        future.add_done_callback(_observed)
        durable: asyncio.Future[T] = loop.create_future()
        durable.add_done_callback(lambda done: self._release(done, future))
        self.put(QueuedEvent(name, fn, durable))
        return future

    def _release(self, durable: asyncio.Future[T], future: asyncio.Future[T]) -> None:
        """Hand an event's result to its request while the controller may answer (a quorum's:
        holds its lease). Else it waits for the lease, or for the resignation, which closes the
        request's connection unanswered: the client cannot tell the outcome (REQUEST_TIMED_OUT
        through a broker), never a success answered by a controller that may be deposed. A
        failure (nothing kept: NOT_CONTROLLER, KAFKA_STORAGE_ERROR) is true at once."""
        if future.done():
            return
        if durable.cancelled() or self.stopped:
            future.cancel()
        elif (exc := durable.exception()) is not None:  # (a refusal claims nothing was done)
            future.set_exception(exc)
        elif not self.may_answer():
            asyncio.get_running_loop().call_later(_HOLD_POLL_S, self._release, durable, future)
        else:
            future.set_result(durable.result())

    def put(self, event: ControllerEvent) -> None:
        self._queue.put_nowait((event, time.monotonic()))
        self._metrics.event_queue_size.set(self._queue.qsize())

    @property
    def queue_size(self) -> int:
        return self._queue.qsize()

    async def _run(self) -> None:
        retry: list[tuple[ControllerEvent, float]] = []
        while True:
            alone = bool(retry)
            if alone:  # they write nothing, so their group commits (no starvation)
                batch, retry = retry, []
            else:
                batch = [await self._queue.get()]
            # Group commit: the events already waiting are processed too (still one at a time,
            # in order, within GROUP_BUDGET_S), then one commit makes them all durable before
            # any is answered.
            outcomes = await self._process_group(batch, more=self._store is not None and not alone)
            self._metrics.event_queue_size.set(self._queue.qsize())
            for (event, enqueued), outcome in zip(batch, outcomes, strict=True):
                if outcome is _RETRY:
                    retry.append((event, enqueued))
                elif outcome is not None:
                    event.fail(outcome)
                else:
                    event.complete()
            # let senders and connections run between events
            await asyncio.sleep(0)

    async def _process_group(
        self, batch: list[tuple[ControllerEvent, float]], more: bool = False
    ) -> list[BaseException | None]:
        """Process, commit, then release (or drop) the effects: each event's outcome (None:
        done; an exception: failed; ``_RETRY``: wrote nothing, but its group's commit failed,
        so it runs again on the state reloaded from the store). ``more``: the events waiting
        when it starts join ``batch`` (appended to it) while the group is within its budget."""
        store, outbox = self._store, self._outbox
        if store is not None:
            store.begin_deferred()
        if outbox is not None:
            outbox.hold()
        outcomes: list[BaseException | None] = []
        wrote: list[bool] = []
        start = time.monotonic()
        # only the events waiting now: one an event queues (a slice's next, Startup after the
        # encoding) runs in a later group, after the loop ran
        last = len(batch) + (min(self._queue.qsize(), MAX_GROUP - len(batch)) if more else 0)
        i = 0
        while i < len(batch) or (
            len(batch) < last and time.monotonic() - start < GROUP_BUDGET_S
        ):
            if i == len(batch):
                batch.append(self._queue.get_nowait())
            event, enqueued = batch[i]
            i += 1
            failure, did_write = self._process(event, enqueued)
            outcomes.append(failure)
            wrote.append(did_write)
        if store is not None:
            self._committing = asyncio.ensure_future(store.commit_deferred())
            try:
                await asyncio.shield(self._committing)
            except StorageError as exc:
                if any(wrote):  # (else the event that lost the group has said it)
                    self._storage_failed(exc, sum(wrote))
                outcomes = [
                    out if out is not None else exc if w else _RETRY
                    for out, w in zip(outcomes, wrote, strict=True)
                ]
                if outbox is not None:
                    outbox.discard()
                self._needs_rollback = True
            # (not on cancellation: close() waits for the commit's thread before the store
            # closes)
            self._committing = None
        if outbox is not None:
            outbox.release()
        self._roll_back()
        return outcomes

    def _process(self, event: ControllerEvent, enqueued: float) -> tuple[BaseException | None, bool]:
        """One event of a group: (its failure, whether it wrote)."""
        start = time.monotonic()
        queue_s = start - enqueued
        self._metrics.event_queue_time_ms.observe(queue_s * 1000)
        outbox = self._outbox
        mark = outbox.mark() if outbox is not None else 0
        failure: BaseException | None = None
        try:
            if not self._consistent():
                raise StorageError("the controller state could not be reloaded from the store")
            event.process()
        except StorageError as exc:  # the store refused this event's writes
            self._storage_failed(exc, 1)
            failure = exc
        except Exception as exc:  # a bug in one event must not stop the controller
            log.exception("controller event %s failed", event.name)
            failure = exc
        wrote = self._store.end_event() if self._store is not None else False
        if failure is not None:
            if outbox is not None:
                outbox.discard(mark)
            # memory may hold part of the event: back to the store's (uncommitted) state
            # before the next event of the group reads it
            self._needs_rollback = True
            self._consistent()
        process_s = time.monotonic() - start
        self._metrics.event_process_time_ms.labels(event.name).observe(process_s * 1000)
        if callable(self.on_processed):
            self.on_processed(event, queue_s, process_s)
        return failure, wrote

    def _consistent(self) -> bool:
        """Before an event reads memory: it equals the store's state (reloaded if needed), or
        the group is lost anyway, so nothing later in it is kept or sent and one reload after
        its commit does (a reload is ~0.5 s at 100k partitions: not one per refused event)."""
        if self._store is not None and self._store.group_lost:
            return True
        return self._roll_back()

    def _roll_back(self) -> bool:
        """Run ``on_rollback`` if memory may be ahead of the store; False if that failed
        (then no event runs until it succeeds: none may act on state the store never had)."""
        if not self._needs_rollback:
            return True
        if self._on_rollback is not None:
            try:
                self._on_rollback()
            except Exception:
                log.critical("controller state could not be reloaded from the store", exc_info=True)
                return False
        self._needs_rollback = False
        return True

    def _storage_failed(self, exc: StorageError, events: int) -> None:
        """Log a refused write, at most once per interval (a full disk fails every event)."""
        now = time.monotonic()
        last = self._last_failure_log
        if last is not None and now - last < COMMIT_FAILURE_LOG_INTERVAL_S:
            self._failures_not_logged += events
            return
        more = self._failures_not_logged
        self._last_failure_log, self._failures_not_logged = now, 0
        log.error(
            "controller events: %s; %d event(s) refused and rolled back%s",
            exc,
            events,
            f" ({more} more since the last report)" if more else "",
        )

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
