"""ControlOrder: the broker applies control requests one at a time, in the order they came.

UpdateMetadata, LeaderAndIsr and StopReplica are fenced by epochs and applied in order
(Kafka's controller sends them over one channel per broker and the broker handles them in
sequence). A small request is applied at once, inside its handler. A large UpdateMetadata is
applied in steps that yield to the event loop (:mod:`kmeta.server.handlers.update_metadata`),
and while it is, every later control request waits behind it here instead of being applied
in the middle of it, so the epochs and the cache see the same order as the controller sent.

A request queued here that is cancelled (its connection closed) lets the next one go.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class ControlOrder:
    __slots__ = ("_tail",)

    def __init__(self) -> None:
        #: done when the last queued request has finished (None: nothing queued)
        self._tail: asyncio.Future[None] | None = None

    @property
    def busy(self) -> bool:
        """A request is being applied in steps or waits: a new one must queue (``after``)."""
        return self._tail is not None and not self._tail.done()

    def after(self, work: Callable[[], Awaitable[T]]) -> asyncio.Task[T]:
        """``work()`` run once every request queued before it has finished. The place in the
        queue is taken now, when the handler runs; the task's end (done, failed or cancelled,
        even before it started) lets the next one go."""
        prev = self._tail
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._tail = done

        async def run() -> T:
            if prev is not None and not prev.done():
                await asyncio.shield(prev)  # our cancellation must not cancel theirs
            return await work()

        def release(_task: asyncio.Task[T]) -> None:
            done.set_result(None)
            if self._tail is done:
                self._tail = None

        task = loop.create_task(run())
        task.add_done_callback(release)
        return task


def in_turn(order: ControlOrder, apply: Callable[[], T]) -> T | asyncio.Task[T]:
    """``apply()`` now, or once the requests queued before it finished (the handler of a
    small control request: LeaderAndIsr, StopReplica)."""
    if not order.busy:
        return apply()

    async def later() -> T:
        return apply()

    return order.after(later)
