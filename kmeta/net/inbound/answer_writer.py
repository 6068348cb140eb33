"""The one write a connection makes for everything it answered in one pass.

Split from :mod:`kmeta.net.inbound.server_connection`: how the chunks of a pass reach the socket (one
``transport.write`` or ``writelines``, one ``writev`` on uvloop, or ``sendfile`` for large cached
pieces) is a concern of its own, and the zero-copy seam lives here only. The connection makes
one writer when it is created and tells it its transport once connected.
"""

from __future__ import annotations

import asyncio

from kmeta.net.hooks import ConnectionObserver
from kmeta.net.inbound import zerocopy
from kmeta.net.inbound.answer_framing import Chunks


class AnswerWriter:
    __slots__ = ("_socket_writer", "_transport", "observer")

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._socket_writer: zerocopy.SocketWriter | None = None  # with info.zero_copy
        #: told of every write (metrics); set once the connection is admitted
        self.observer: ConnectionObserver | None = None

    def connected(self, transport: asyncio.Transport, zero_copy: bool) -> None:
        """Write to ``transport`` from now on; with ``zero_copy``, large spliceable pieces go
        straight to its socket (plain TCP only: a TLS transport has no ``socket`` to lend)."""
        self._transport = transport
        if zero_copy:
            sock = transport.get_extra_info("socket")
            self._socket_writer = None if sock is None else zerocopy.SocketWriter(sock)

    def write(self, out: Chunks) -> None:
        """ONE write for everything answered in this pass (writelines: one writev on uvloop).

        With zero copy, large cached pieces go straight to the socket by sendfile while the
        transport has nothing buffered (so nothing can overtake it); the transport gets
        whatever the kernel did not take at once. Nothing is written once the transport is
        closing (the connection is being dropped).
        """
        transport = self._transport
        if out and transport is not None and not transport.is_closing():
            if len(out) == 1:
                transport.write(out[0])
            elif (
                self._socket_writer is not None
                and any(type(chunk) is zerocopy.SpliceableBytes for chunk in out)
                and not transport.get_write_buffer_size()
            ):
                rest = self._socket_writer.send(out)
                if rest:
                    transport.writelines(rest)
            else:
                transport.writelines(out)
            if self.observer is not None:
                self.observer.on_write(sum(map(len, out)))
