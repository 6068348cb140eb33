"""Backpressure for one server connection, in one small class.

Three reasons stop us reading a socket: the peer is not reading our answers (the transport's
write buffer is above its high-water mark, so asyncio called ``pause_writing``), too many
of its requests are still waiting for an asynchronous handler, or the daemon's request memory
pool is full (:mod:`kmeta.net.inbound.memory_pool`). Either way, reading more would
only make the broker buffer without bound. Reading resumes when every reason is gone.
Writers that want to wait for room ``await drain()``; ``connection_lost`` wakes them.
"""

from __future__ import annotations

import asyncio


class FlowControl:
    __slots__ = ("_holds", "_transport", "_writable", "write_paused")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._writable = asyncio.Event()
        self._writable.set()
        self._holds: set[str] = set()
        self.write_paused = False

    # -- called by the Protocol's pause_writing / resume_writing / connection_lost ------------
    def pause_writing(self) -> None:
        self.write_paused = True
        self._writable.clear()
        self.hold_reading("write")

    def resume_writing(self) -> None:
        self.write_paused = False
        self._writable.set()
        self.release_reading("write")

    def connection_lost(self) -> None:
        self._holds.clear()
        self._writable.set()  # waiters wake and find the transport closing

    async def drain(self) -> None:
        if not self._writable.is_set():
            await self._writable.wait()

    # -- reading -------------------------------------------------------------------------------
    @property
    def reading_paused(self) -> bool:
        return bool(self._holds)

    def reading_held_except(self, reason: str) -> bool:
        """Paused for some reason other than ``reason``."""
        return bool(self._holds) and self._holds != {reason}

    def hold_reading(self, reason: str) -> None:
        if not self._holds and not self._transport.is_closing():
            self._transport.pause_reading()
        self._holds.add(reason)

    def release_reading(self, reason: str) -> None:
        if reason not in self._holds:
            return
        self._holds.discard(reason)
        if not self._holds and not self._transport.is_closing():
            self._transport.resume_reading()
