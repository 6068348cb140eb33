"""StreamedRequest: a control request read in steps from its frame, applied as it is read.

The registry's ``decode`` hook of UpdateMetadata and LeaderAndIsr (v5+ / v2+... whatever has
the ``topic_states`` array on the wire) returns one of these instead of the decoded request:
the fields before the topic states are read (enough to fence it), the topic states are read
one at a time while the handler applies them (:meth:`kmeta.protocol.codec.schema.Message.stream`),
and the fields after them last. A body under :data:`SYNC_BELOW_BYTES` is still read and
applied at once inside the handler; a larger one in steps of at most :data:`STEP_S` that yield
the event loop (one topic is never split), queued behind the broker's
:class:`kmeta.server.control_order.ControlOrder`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Iterator
from typing import Any, Generic, Protocol, TypeVar, cast

from kmeta.protocol.codec.schema import Message, Record
from kmeta.protocol.codec.stream import Stream

#: a body at least this large is applied in steps that yield to the event loop
SYNC_BELOW_BYTES = 256 * 1024
#: the longest one step runs before it yields (one topic is never split)
STEP_S = 0.02


#: the whole request's record (UpdateMetadataRequest, LeaderAndIsrRequest)
R = TypeVar("R", bound=Record)
#: the record of one of its topic states
T = TypeVar("T")
#: what the steps of an apply return (the answer)
A = TypeVar("A")


class ControlRequest(Protocol):
    """UpdateMetadata, LeaderAndIsr and StopReplica (whole, or read in steps), as admission
    and the state-change log read them (kmeta.server.handlers.control_log)."""

    @property
    def controller_id(self) -> int: ...

    @property
    def controller_epoch(self) -> int: ...

    @property
    def broker_epoch(self) -> int: ...


class Head(ControlRequest, Protocol):
    """The fields before the topic states, as read first (enough to fence the request)."""

    def _asdict(self) -> dict[str, Any]: ...


class StreamedRequest(Generic[R, T]):
    """A request (record ``R``) whose fields before its topic states (records ``T``) are
    read; the topic states and the fields after them are read from ``frame`` as it is
    applied. A handler module names its own: ``StreamedRequest[UpdateMetadataRequest,
    UpdateMetadataTopicState]``."""

    __slots__ = ("count", "first", "frame", "head", "message", "stream", "version")

    def __init__(
        self, message: Message[R], version: int, frame: bytes, stream: Stream, head: Head, count: int, first: int
    ) -> None:
        self.message = message
        self.version = version
        self.frame = frame
        self.stream = stream
        self.head = head
        self.count = count  # topic states
        self.first = first  # position of the first one

    @property
    def controller_id(self) -> int:
        return self.head.controller_id

    @property
    def controller_epoch(self) -> int:
        return self.head.controller_epoch

    @property
    def broker_epoch(self) -> int:
        return self.head.broker_epoch

    @property
    def large(self) -> bool:
        return len(self.frame) - self.first >= SYNC_BELOW_BYTES

    def topic_states(self) -> Iterator[tuple[T, int]]:
        """Each topic state with the position after it."""
        return self.stream.elements(self.frame, self.first, self.count)

    def rest(self, end: int, topic_states: tuple[T, ...] = ()) -> R:
        """The whole request record, with ``topic_states`` (none: the ones applied in steps),
        the fields after them read from ``end``."""
        tail = self.stream.tail(self.frame, end)
        make = cast(Callable[..., R], self.message.cls)  # the record's fields, by name
        states = {self.stream.field: topic_states}
        return make(self.version, **self.head._asdict(), **states, **tail._asdict())

    def decoded(self) -> R:
        """The whole request, decoded at once (only for a request that is not applied)."""
        end = self.first
        states = []
        for ts, after in self.topic_states():
            states.append(ts)
            end = after
        return self.rest(end, tuple(states))

    @classmethod
    def read(cls, message: Message[R], field: str, frame: bytes, version: int, pos: int) -> StreamedRequest[R, T]:
        stream = message.stream(version, field)
        head, count, first = stream.head(frame, pos)
        return cls(message, version, frame, stream, head, count, first)


def run(steps: Generator[None, None, A]) -> A:
    """The steps' result, run at once."""
    try:
        while True:
            next(steps)
    except StopIteration as done:
        result: A = done.value  # what the generator returned
    return result


async def run_yielding(steps: Generator[None, None, A]) -> A:
    """The steps' result, the loop yielded between two."""
    try:
        while True:
            next(steps)
            await asyncio.sleep(0)
    except StopIteration as done:
        result: A = done.value  # what the generator returned
    return result
