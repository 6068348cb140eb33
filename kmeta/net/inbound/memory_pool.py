"""Request bytes buffered across every connection of a daemon, bounded (Kafka's
``queued.max.request.bytes`` and its MemoryPool).

``max_frame_size`` bounds one request; nothing bounded their sum: ten connections each sending
95 MiB of a declared 100 MiB frame made a broker hold a gigabyte. Each connection reports
what it holds — the partial frame in its splitter plus complete frames it has read but not
handled yet — and the pool adds them up. While the total is at or above the capacity, a
connection whose holding grew stops reading (as Kafka mutes a channel whose request cannot be
allocated) and is woken when the total falls below it again. A connection holding nothing
(its requests were complete and answered) keeps reading: small requests on other
connections are still served while big partial ones wait.

Overshoot is bounded by one socket read per connection (a read is accounted after it
arrived). A paused partial request still counts against the request timeout, so partial
frames that never complete cannot hold the pool for ever.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger("kmeta.net.memory")

DEFAULT_QUEUED_MAX_REQUEST_BYTES = 256 * 1024 * 1024
#: a full pool is said at WARN at most this often
WARN_INTERVAL_S = 60.0

#: a connection's wake-up: resume reading
Waiter = Callable[[], None]


class RequestMemoryPool:
    __slots__ = ("_waiters", "_warned_at", "capacity", "pauses", "used")

    def __init__(self, capacity: int = DEFAULT_QUEUED_MAX_REQUEST_BYTES) -> None:
        if capacity <= 0:
            raise ValueError("queued.max.request.bytes must be positive")
        self.capacity = capacity
        self.used = 0
        self.pauses = 0  # connections paused because the pool was full, since start
        self._waiters: dict[Waiter, None] = {}  # insertion-ordered set: woken first come first
        self._warned_at = -WARN_INTERVAL_S

    @property
    def full(self) -> bool:
        return self.used >= self.capacity

    def account(self, held_before: int, held_now: int, waiter: Waiter) -> bool:
        """A connection's holding changed; True when it must stop reading until ``waiter``."""
        self.used += held_now - held_before
        if held_now > held_before:
            if self.used >= self.capacity:
                self._waiters[waiter] = None
                self.pauses += 1
                self._warn()
                return True
        elif self._waiters and self.used < self.capacity:
            self._wake()
        return False

    def forget(self, waiter: Waiter) -> None:
        """The connection is gone: it no longer waits (what it held is released by ``account``)."""
        self._waiters.pop(waiter, None)

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def _warn(self) -> None:
        now = time.monotonic()
        if now - self._warned_at >= WARN_INTERVAL_S:
            self._warned_at = now
            log.warning(
                "queued.max.request.bytes (%d) reached: %d bytes of requests buffered; "
                "connections whose requests grow wait (said at most once a minute)",
                self.capacity, self.used,
            )  # fmt: skip

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters:
            waiter()


#: the flow-control hold of a connection stopped by a full pool (see FlowControl)
MEMORY = "memory"


class HoldReading(Protocol):
    """What a share stops and restarts: the connection's reading (its FlowControl)."""

    def hold_reading(self, reason: str) -> None: ...

    def release_reading(self, reason: str) -> None: ...


class PoolShare:
    """What one connection holds of its daemon's pool, and the hold on its reading while the
    pool is full. The connection says what it holds after every read (:meth:`account`) and
    gives it all back when it closes (:meth:`release`)."""

    __slots__ = ("_pool", "flow", "held")

    def __init__(self, pool: RequestMemoryPool) -> None:
        self._pool = pool
        self.held = 0  # request bytes (partial frame + frames read, not handled) counted in the pool
        self.flow: HoldReading | None = None  # set once connected

    def account(self, held: int) -> None:
        """The connection now holds ``held`` bytes of requests; stop reading if the pool says so."""
        if held == self.held:
            return
        before, self.held = self.held, held
        if self._pool.account(before, held, self._resume) and self.flow is not None:
            self.flow.hold_reading(MEMORY)

    def _resume(self) -> None:
        if self.flow is not None:
            self.flow.release_reading(MEMORY)

    def release(self) -> bool:
        """Give back everything held (closing): the pool may wake other connections. True when
        something was held (the connection drops what it buffered)."""
        self._pool.forget(self._resume)
        if not self.held:
            return False
        before, self.held = self.held, 0
        self._pool.account(before, 0, self._resume)
        return True
