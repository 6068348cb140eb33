"""The one timer of a connection that serves its three timeouts.

A Kafka broker closes a connection idle for ``connections.max.idle.ms``; kmeta also closes one
whose request was started and not completed within ``request_timeout_s`` (a slow-loris peer
would otherwise hold a partial frame, and request memory, for ever) and aborts one that has
not read its answers for ``write_timeout_s``. One ``call_later`` per connection, re-armed only
when a deadline moves earlier, serves all three: a timer per read would cost more than the
Metadata answer it guards.

The connection writes the timestamps (``last_active`` on every read, which is why they are
plain attributes rather than methods) and the watchdog decides; it tells the connection what
to close for through ``expire`` and asks it what it needs through three narrow callables.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kmeta.net.hooks import FaultKind
from kmeta.net.inbound.serving import ConnectionLimits

#: ``expire(kind, reason, abort)``: close the connection for this fault
Expire = Callable[[FaultKind, str, bool], None]


class Watchdog:
    __slots__ = (
        "_busy",
        "_expire",
        "_gone",
        "_limits",
        "_not_reading",
        "_timer",
        "_timer_at",
        "last_active",
        "partial_since",
        "stalled_since",
    )

    def __init__(
        self,
        limits: ConnectionLimits,
        expire: Expire,
        gone: Callable[[], bool],
        busy: Callable[[], bool],
        not_reading: Callable[[], bool],
    ) -> None:
        """``gone``: the transport is closed or closing (the timer then stops for good).
        ``busy``: answers are still owed (an idle timeout waits for them).
        ``not_reading``: the connection holds reading for a reason of its own other than the
        memory pool, so a partial frame is not the peer's delay."""
        self._limits = limits
        self._expire = expire
        self._gone = gone
        self._busy = busy
        self._not_reading = not_reading
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")  # monotonic time the timer fires
        self.last_active = time.monotonic()
        self.partial_since: float | None = None  # a frame started and is not complete yet
        self.stalled_since: float | None = None  # the peer stopped reading our answers

    def arm(self, deadline: float) -> None:
        """Make the timer fire no later than ``deadline``."""
        if deadline >= self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        delay = max(0.0, deadline - time.monotonic())
        self._timer = asyncio.get_running_loop().call_later(delay, self._check)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _check(self) -> None:
        """Idle timeout, request (partial frame) timeout, write timeout."""
        self._timer_at = float("inf")
        self._timer = None
        if self._gone():
            return
        limits = self._limits
        now = time.monotonic()
        if self.stalled_since is not None:
            stalled_for = now - self.stalled_since
            if stalled_for >= limits.write_timeout_s:
                self._expire(
                    FaultKind.WRITE_TIMEOUT, f"not reading its answers for {stalled_for:.1f} s", True
                )
                return
            self.arm(self.stalled_since + limits.write_timeout_s)
        if self.partial_since is not None and self._not_reading():
            # We are not reading: not the peer's delay. (Paused only because the memory pool
            # is full, the partial request still times out: partial frames that never
            # complete must not hold the pool for ever.)
            self.partial_since = now
        if self.partial_since is not None:
            waited = now - self.partial_since
            if waited >= limits.request_timeout_s:
                self._expire(
                    FaultKind.REQUEST_TIMEOUT,
                    f"request incomplete after {waited:.1f} s (request timeout)",
                    False,
                )
                return
            self.arm(self.partial_since + limits.request_timeout_s)
        idle_for = now - self.last_active
        if idle_for >= limits.idle_timeout_s and not self._busy():
            self._expire(
                FaultKind.IDLE_TIMEOUT, f"idle for {idle_for:.1f} s (connections.max.idle.ms)", False
            )
            return
        base = self.last_active if idle_for < limits.idle_timeout_s else now
        self.arm(base + limits.idle_timeout_s)
