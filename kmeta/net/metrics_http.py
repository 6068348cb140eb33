"""A tiny HTTP server on the daemon's own event loop: ``GET /metrics`` and ``GET /status``.

It runs on the daemon's loop (not prometheus_client's thread) so that collectors and the status
callback read daemon state without locks. Every peer-controlled size is bounded: the request
head may be at most 8 KiB and must arrive within 5 s; one request per connection
(``Connection: close``). Anything but GET is 405, an unknown path 404.

* ``/metrics``: the daemon's CollectorRegistry in the Prometheus text format;
* ``/status``: JSON from the daemon's status callback (404 when it has none).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger("kmeta.net.metrics_http")

MAX_HEAD = 8 * 1024
READ_TIMEOUT_S = 5.0

StatusFn = Callable[[], dict[str, Any]]


class MetricsServer:
    def __init__(
        self,
        registry: CollectorRegistry,
        host: str,
        port: int,
        status: StatusFn | None = None,
    ) -> None:
        self.registry = registry
        self.host = host
        self.requested_port = port
        self.status = status
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, self.host, self.requested_port, limit=MAX_HEAD, reuse_address=True
        )
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    @property
    def port(self) -> int:
        if self._server is None or not self._server.sockets:
            return self.requested_port
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            status, ctype, body = self._respond(head)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            status, ctype, body = "400 Bad Request", "text/plain", b"bad request\n"
        except Exception:  # a collector or the status callback failed: ours, log it
            log.exception("metrics request failed")
            status, ctype, body = "500 Internal Server Error", "text/plain", b"error\n"
        try:
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await asyncio.wait_for(writer.drain(), READ_TIMEOUT_S)
        except (OSError, TimeoutError):
            pass
        finally:
            writer.close()

    def _respond(self, head: bytes) -> tuple[str, str, bytes]:
        parts = head.split(b"\r\n", 1)[0].split()
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            return "400 Bad Request", "text/plain", b"bad request\n"
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if method != b"GET":
            return "405 Method Not Allowed", "text/plain", b"GET only\n"
        if target == b"/metrics":
            return "200 OK", CONTENT_TYPE_LATEST, generate_latest(self.registry)
        if target == b"/status" and self.status is not None:
            body = json.dumps(self.status(), indent=1, sort_keys=True).encode() + b"\n"
            return "200 OK", "application/json", body
        return "404 Not Found", "text/plain", b"try /metrics or /status\n"
