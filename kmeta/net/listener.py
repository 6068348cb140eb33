"""A listening socket that accepts Kafka-protocol connections and can shut down in order.

Shutdown order (:meth:`Listener.shutdown`): stop accepting; ask every connection to finish the
requests it has already read and close; wait up to a timeout; abort the stragglers.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kmeta.net.dispatch import HandlerRegistry
from kmeta.net.server_connection import ConnectionLimits, ServerConnection, ServingInfo

log = logging.getLogger("kmeta.net.listener")


class Listener:
    def __init__(
        self,
        name: str,
        host: str,
        port: int,
        *,
        is_control: bool,
        registry: HandlerRegistry,
        state: Any,
        limits: ConnectionLimits | None = None,
    ) -> None:
        self.name = name
        self.host = host
        self.requested_port = port
        self.info = ServingInfo(name, is_control, registry, state, limits or ConnectionLimits())
        self.connections: set[ServerConnection] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._make_connection, self.host, self.requested_port, reuse_address=True, backlog=1024
        )
        log.info("listener %s on %s:%d", self.name, self.host, self.port)

    def _make_connection(self) -> ServerConnection:
        conn = ServerConnection(self.info, self.connections.discard)
        self.connections.add(conn)
        return conn

    @property
    def port(self) -> int:
        """The bound port (the OS's pick when started with port 0)."""
        if self._server is None or not self._server.sockets:
            return self.requested_port
        return int(self._server.sockets[0].getsockname()[1])

    def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()

    async def shutdown(self, timeout_s: float = 5.0) -> None:
        self.stop_accepting()
        conns = list(self.connections)
        for conn in conns:
            conn.close_gracefully()
        if conns:
            _, stragglers = await asyncio.wait([c.closed for c in conns], timeout=timeout_s)
            if stragglers:
                log.warning("listener %s: aborting %d connections", self.name, len(stragglers))
                for conn in conns:
                    if not conn.closed.done():
                        conn.abort()
                await asyncio.wait([c.closed for c in conns], timeout=1.0)
        if self._server is not None:
            await self._server.wait_closed()
