"""A listening socket that accepts Kafka-protocol connections and can shut down in order.

Shutdown order (:meth:`Listener.shutdown`): stop accepting; ask every connection to finish the
requests it has already read and close; wait up to a timeout; abort the stragglers.

Connection limits (Kafka's ``max.connections`` / ``max.connections.per.ip``, here per listener
so a client flood cannot lock the controller out of the control listener): a connection over
either limit is aborted as soon as it is accepted, counted in ``refused`` and logged at debug.
With ``ssl`` the listener speaks TLS (its own context); the limits then apply after the
handshake, which asyncio completes before handing the connection over.

A listener may be started bound but closed (``start(serve=False)``: its port is known, a
client connecting is refused and tries its next bootstrap server) and opened later
(:meth:`Listener.open`): the broker opens its client listeners only once it holds metadata.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl as ssl_module
from collections import Counter
from typing import Generic

from kmeta.net.dispatch import HandlerRegistry, S
from kmeta.net.hooks import NO_HOOKS, ConnectionHooks
from kmeta.net.inbound import zerocopy
from kmeta.net.inbound.memory_pool import RequestMemoryPool
from kmeta.net.inbound.server_connection import ServerConnection
from kmeta.net.inbound.serving import ConnectionLimits, ServingInfo

log = logging.getLogger("kmeta.net.listener")

_BACKLOG = 1024


class Listener(Generic[S]):
    def __init__(
        self,
        name: str,
        host: str,
        port: int,
        *,
        is_control: bool,
        registry: HandlerRegistry[S],
        state: S,
        limits: ConnectionLimits | None = None,
        ssl: ssl_module.SSLContext | None = None,
        zero_copy: bool = True,
        pool: RequestMemoryPool | None = None,
    ) -> None:
        self.name = name
        self.host = host
        self.requested_port = port
        self.info = ServingInfo(
            name, is_control, registry, state, limits or ConnectionLimits(),
            # TLS encrypts in user space: no pages to lend the kernel there
            zero_copy=zero_copy and ssl is None and zerocopy.AVAILABLE,
            pool=pool,  # shared by every listener of the daemon
        )  # fmt: skip
        self.connections: set[ServerConnection] = set()
        #: attached to every connection accepted from now on (metrics, authentication)
        self.hooks: ConnectionHooks = NO_HOOKS
        self.ssl = ssl
        self._server: asyncio.Server | None = None
        self._opening: asyncio.Task[None] | None = None  # start_serving after open()
        self._stopped = False
        self._admitted = 0
        self._per_ip: Counter[str] = Counter()
        self.refused = 0  # connections closed at accept by the limits

    async def start(self, *, serve: bool = True) -> None:
        """Bind; accept connections unless ``serve`` is False (then: :meth:`open` later)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._make_connection,
            self.host,
            self.requested_port,
            reuse_address=True,
            backlog=_BACKLOG,
            ssl=self.ssl,
            # a TLS handshake is a request like any other: bounded by the request timeout
            ssl_handshake_timeout=self.info.limits.request_timeout_s if self.ssl else None,
            start_serving=serve,
        )
        log.info(
            "listener %s on %s:%d%s%s",
            self.name, self.host, self.port, " (TLS)" if self.ssl else "",
            "" if serve else " (bound; not accepting yet)",
        )  # fmt: skip

    @property
    def serving(self) -> bool:
        return self._server is not None and (self._server.is_serving() or self._opening is not None)

    def open(self) -> None:
        """Start accepting on a listener started with ``serve=False``.

        The sockets listen at once (a client connecting from now on waits in the backlog
        instead of being refused); the loop accepts from its next turn.
        """
        if self._server is None or self._stopped or self.serving:
            return
        for sock in self._server.sockets:
            # asyncio's and uvloop's socket wrappers hide listen(): a duplicate of the
            # descriptor reaches the same socket
            with socket.socket(fileno=os.dup(sock.fileno())) as dup:
                dup.listen(_BACKLOG)
        self._opening = asyncio.get_running_loop().create_task(self._server.start_serving())
        log.info("listener %s on %s:%d accepting", self.name, self.host, self.port)

    def _make_connection(self) -> ServerConnection:
        return ServerConnection(self.info, self._closed, self._admit, self.hooks)

    def _admit(self, conn: ServerConnection) -> bool:
        """Called from connection_made: only then is a connection tracked. (On a TLS listener
        a failed handshake never reaches connection_made, nor connection_lost.)"""
        limits = self.info.limits
        if not (limits.max_connections or limits.max_connections_per_ip):
            self.connections.add(conn)
            return True
        ip = str(conn.peer[0]) if isinstance(conn.peer, tuple) else str(conn.peer)
        if limits.max_connections and self._admitted >= limits.max_connections:
            reason = f"max.connections {limits.max_connections}"
        elif limits.max_connections_per_ip and self._per_ip[ip] >= limits.max_connections_per_ip:
            reason = f"max.connections.per.ip {limits.max_connections_per_ip}"
        else:
            self._admitted += 1
            self._per_ip[ip] += 1
            self.connections.add(conn)
            return True
        self.refused += 1
        log.debug("listener %s refused a connection from %s: %s", self.name, conn.peer, reason)
        return False

    def _closed(self, conn: ServerConnection) -> None:
        self.connections.discard(conn)
        limits = self.info.limits
        if conn.admitted and (limits.max_connections or limits.max_connections_per_ip):
            ip = str(conn.peer[0]) if isinstance(conn.peer, tuple) else str(conn.peer)
            self._admitted -= 1
            self._per_ip[ip] -= 1
            if self._per_ip[ip] <= 0:
                del self._per_ip[ip]

    @property
    def port(self) -> int:
        """The bound port (the OS's pick when started with port 0)."""
        if self._server is None or not self._server.sockets:
            return self.requested_port
        return int(self._server.sockets[0].getsockname()[1])

    def stop_accepting(self) -> None:
        self._stopped = True
        if self._opening is not None and not self._opening.done():
            self._opening.cancel()  # not started yet: it never runs
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
