"""The answers of one connection that wait behind a slow one, kept in request order.

A handler may return an awaitable (a request forwarded to the controller); later requests on
the same connection are still handled, but their answers must not overtake it (Kafka answers
a connection's requests in order). While anything waits here, every new answer joins the
queue, encoded; when a slow answer completes, the connection takes the answers that are then
ready at the head, in order, and writes them at once.

Split from :mod:`kmeta.net.inbound.server_connection`: the queue is a ``deque`` so the connection's
per-read test (``not pending``) stays one C call.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any

from kmeta.net.dispatch import AnyHandler, Reply
from kmeta.net.inbound.answer_framing import Chunks, encode_answer
from kmeta.protocol.codec.schema import Record
from kmeta.protocol.header import RequestHeader


class _SlowAnswer:
    __slots__ = ("future", "handler", "header")

    def __init__(self, future: asyncio.Future[Any], header: RequestHeader, handler: AnyHandler[Any]) -> None:
        self.future = future
        self.header = header
        self.handler = handler


class Held:
    """take_ready stopped at a finished answer that may not leave yet (ConnectionHooks)."""


HELD = Held()


class PendingAnswers(collections.deque[Chunks | _SlowAnswer]):
    """Encoded answers (``Chunks``) and slow answers still running, in request order."""

    def add_slow(self, future: asyncio.Future[Any], header: RequestHeader, handler: AnyHandler[Any]) -> None:
        self.append(_SlowAnswer(future, header, handler))

    def add_answer(self, header: RequestHeader, handler: AnyHandler[Any], result: Reply[Record]) -> None:
        """An answer ready now, behind a slow one: encoded, it waits for its turn."""
        chunks: Chunks = []
        encode_answer(header, handler, result, chunks)
        self.append(chunks)

    def take_ready(
        self, out: Chunks, may_leave: Callable[[asyncio.Future[Any]], bool] | None = None
    ) -> BaseException | Held | None:
        """Move the answers ready at the head into ``out``, in order, up to the first slow one
        still running. A slow one that failed stops it: its exception is returned
        (``CancelledError`` when it was cancelled) and it stays at the head. So does a
        finished one ``may_leave`` holds back: :data:`HELD` is returned."""
        while self:
            head = self[0]
            if isinstance(head, list):
                out += head
            elif not head.future.done():
                return None
            elif may_leave is not None and not may_leave(head.future):
                return HELD
            elif head.future.cancelled():
                return asyncio.CancelledError()
            else:
                exc = head.future.exception()
                if exc is not None:
                    return exc
                encode_answer(head.header, head.handler, head.future.result(), out)
            self.popleft()
        return None

    def cancel(self) -> None:
        """The connection is closing: the slow answers are not awaited any more."""
        for slot in self:
            if isinstance(slot, _SlowAnswer):
                slot.future.cancel()
        self.clear()
