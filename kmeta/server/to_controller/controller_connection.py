"""The broker's connections to a controller: opened with TLS and SASL as configured, then
ApiVersions, as Kafka's broker-to-controller channel starts each one.

Shared by the link's own connection (registration, heartbeats, controlled shutdown:
:mod:`controller_link`) and the forwarding one (:mod:`forwarding`).
"""

from __future__ import annotations

import asyncio
from ssl import SSLContext
from typing import TypeVar

from kmeta import __version__
from kmeta.net.connection import KafkaConnection
from kmeta.net.security.sasl_client import ClientCredential, authenticate
from kmeta.protocol.codec.schema import Record, Request
from kmeta.protocol.errors import ErrorCode, ProtocolError
from kmeta.protocol.messages import api_versions as av
from kmeta.protocol.registry import peer_versions

#: the response record a request names (kmeta.protocol.codec.schema.Request)
R = TypeVar("R", bound=Record)

REQUEST_TIMEOUT_S = 10.0
#: what a lost or broken controller connection raises
NET_ERRORS = (OSError, ConnectionError, TimeoutError, ProtocolError)


async def call(conn: KafkaConnection, request: Request[R]) -> R:
    """Send and await; a timeout closes the connection. Cancelling leaves no orphan future."""
    future = conn.send(request)
    try:
        async with asyncio.timeout(REQUEST_TIMEOUT_S):
            return await future
    except TimeoutError:
        conn.close()
        raise


async def open_connection(
    host: str,
    port: int,
    client_id: str,
    ssl: SSLContext | None = None,
    sasl: ClientCredential | None = None,
) -> tuple[KafkaConnection, dict[int, range]]:
    """Connect (TLS when ``ssl``), authenticate (SASL when ``sasl``) and ask ApiVersions;
    returns the connection and the ranges."""
    conn = await KafkaConnection.open(
        host, port, client_id=client_id, timeout_s=REQUEST_TIMEOUT_S, ssl=ssl
    )
    try:
        if sasl is not None:
            await authenticate(conn, sasl, REQUEST_TIMEOUT_S)
        response = await call(
            conn,
            av.ApiVersionsRequest(
                version=3, client_software_name="kmeta", client_software_version=__version__
            ),
        )
    except BaseException:
        conn.close()
        raise
    if response.error_code != ErrorCode.NONE:
        conn.close()
        raise ConnectionError(f"ApiVersions: {ErrorCode(response.error_code).name}")
    return conn, peer_versions(response)
