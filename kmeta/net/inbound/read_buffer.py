"""What one server connection has read and not yet handled, and what that costs the daemon.

Split from :mod:`kmeta.net.inbound.server_connection`, which keeps dispatch, the writes and closing.
Three things live here because each one's size is the peer's doing and they are bounded
together, by holding reading (the connection's
:class:`~kmeta.net.inbound.flow_control.FlowControl`, made here) and by timeouts (its
:class:`~kmeta.net.inbound.watchdog.Watchdog`, made here too: it asks whether reading is held):

* the frame splitter's partial frame: the request timeout runs while one is started
  (:meth:`ReadBuffer.split` arms the watchdog);
* the stash: whole frames read while the peer was not reading our answers. Reading is paused
  then (:class:`~kmeta.net.inbound.flow_control.FlowControl`), so the stash holds at most the rest of
  one read; it is handed back when the peer reads again (:meth:`ReadBuffer.resume_writing`);
* the connection's share of the daemon's request memory pool, which counts both
  (:meth:`ReadBuffer.account`) and may hold reading while the pool is full.

Reading is also held while more than ``max_queued_requests`` answers wait behind a slow one
(:meth:`ReadBuffer.queued`). The connection reads ``splitter.buffered`` and ``stashed``
directly on its hot path (an attribute, not a call, on every read).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kmeta.net.inbound.flow_control import FlowControl
from kmeta.net.inbound.memory_pool import MEMORY, PoolShare, RequestMemoryPool
from kmeta.net.inbound.serving import ConnectionLimits
from kmeta.net.inbound.watchdog import Expire, Watchdog
from kmeta.protocol.framing import FrameSplitter


class ReadBuffer:
    __slots__ = ("_limits", "flow", "memory", "splitter", "stashed", "watchdog")

    def __init__(
        self,
        limits: ConnectionLimits,
        pool: RequestMemoryPool | None,
        expire: Expire,
        gone: Callable[[], bool],
        busy: Callable[[], bool],
    ) -> None:
        """``expire``, ``gone``, ``busy``: the connection's, for the watchdog (see Watchdog);
        it asks this buffer whether reading is held for a reason of the connection's own."""
        self._limits = limits
        #: the connection's timeouts: it arms the idle one, this buffer the request and write ones
        self.watchdog = Watchdog(limits, expire, gone, busy, self._not_reading)
        self.splitter = FrameSplitter(limits.max_frame_size)
        #: frames read but not handled because the peer stopped reading (None: not stashing)
        self.stashed: list[bytes] | None = None
        #: the request bytes this connection holds in the daemon's pool (None: no pool)
        self.memory = None if pool is None else PoolShare(pool)
        self.flow: FlowControl | None = None  # set once connected

    def connected(self, transport: asyncio.Transport) -> FlowControl:
        flow = self.flow = FlowControl(transport)
        if self.memory is not None:
            self.memory.flow = flow
        return flow

    def split(self, data: bytes, now: float) -> list[bytes]:
        """The whole frames ``data`` completes that are to be handled now: none while the
        stash is kept (they join it). Raises ProtocolError for a frame the peer must not send
        (over the size limit), refused from its prefix before it is buffered."""
        splitter = self.splitter
        frames = splitter.feed(data)
        watchdog = self.watchdog
        if splitter.buffered:
            if watchdog.partial_since is None or frames:  # a request started: request_timeout_s
                watchdog.partial_since = now
                watchdog.arm(now + self._limits.request_timeout_s)
        else:
            watchdog.partial_since = None
        if self.stashed is not None:
            self.stashed += frames
            return []
        return frames

    def stash(self, frames: list[bytes], start: int = 0) -> bool:
        """Keep ``frames[start:]`` (the rest of a read; ``[]``: the rest is still to be split)
        until the peer reads our answers again, if it has stopped: True when kept. Bounds what
        one read can make us buffer. (Sliced only then: it is asked after every due write.)"""
        if self.flow is not None and self.flow.write_paused:
            self.stashed = frames[start:]
            return True
        return False

    def queued(self, answers: int) -> None:
        """After a read: ``answers`` wait behind a slow one; above max_queued_requests reading
        stops (a peer pipelining into a slow handler would otherwise grow the queue)."""
        if answers > self._limits.max_queued_requests and self.flow is not None:
            self.flow.hold_reading("queue")

    def dequeued(self, answers: int) -> None:
        """After slow answers left: ``answers`` still wait. Reading resumes once at most half of
        max_queued_requests do (so it does not flap at the limit)."""
        if answers <= self._limits.max_queued_requests // 2 and self.flow is not None:
            self.flow.release_reading("queue")

    def pause_writing(self) -> None:
        """The peer stopped reading our answers: stop reading it, and cut it off if it does
        not read again within write_timeout_s."""
        if self.flow is not None:
            self.flow.pause_writing()
            now = time.monotonic()
            self.watchdog.stalled_since = now
            self.watchdog.arm(now + self._limits.write_timeout_s)

    def resume_writing(self) -> list[bytes] | None:
        """The peer reads again: reading resumes; the frames it stashed, to handle now."""
        self.watchdog.stalled_since = None
        if self.flow is not None:
            self.flow.resume_writing()
        stashed, self.stashed = self.stashed, None
        return stashed

    def account(self) -> None:
        """Tell the pool what this connection holds now (it may stop our reading)."""
        memory = self.memory
        if memory is not None and (memory.held or self.splitter.buffered or self.stashed):
            held = self.splitter.buffered
            if self.stashed:
                held += sum(map(len, self.stashed))
            memory.account(held)

    def _not_reading(self) -> bool:
        # held by us (write stalled, queue, shutdown): a partial frame is not the peer's delay.
        # The memory pool's hold does not count (see Watchdog): the request timeout runs on.
        return self.flow is not None and self.flow.reading_held_except(MEMORY)

    def connection_lost(self) -> None:
        """Closed: give the pool back, wake writers waiting to drain, stop the timer."""
        self.release()
        if self.flow is not None:
            self.flow.connection_lost()
        self.watchdog.cancel()

    def release(self) -> None:
        """Closing: drop the stash, and give the pool back what we held (dropping the partial
        frame, which is counted there)."""
        self.stashed = None
        if self.memory is not None and self.memory.release():
            self.splitter = FrameSplitter(self._limits.max_frame_size)
