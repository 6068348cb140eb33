"""BrokerChannel: the transaction coordinator's connections to other brokers (Kafka's
``TransactionMarkerChannelManager`` network client and ``AddPartitionsToTxnManager``'s).

The connections go to a broker's control listener, authenticated as the replica fetcher's (TLS
and the cluster credential as that listener's protocol says): it is kmeta's inter-broker
listener, and what goes over it (WriteTxnMarkers, AddPartitionsToTxn v4+) needs
CLUSTER_ACTION. One connection per broker, shared by every request to it (pipelined).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from ssl import SSLContext
from typing import TypeVar

from kmeta.metadata.cache import MetadataCache
from kmeta.net.connection import KafkaConnection
from kmeta.net.security.sasl_client import ClientCredential
from kmeta.net.tls import uses_sasl, uses_tls
from kmeta.protocol.codec.schema import Record, Request
from kmeta.protocol.registry import highest_common
from kmeta.server.config import BrokerConfig
from kmeta.server.to_controller.controller_connection import call, open_connection

R = TypeVar("R", bound=Record)


class BrokerChannel:
    def __init__(self, config: BrokerConfig, cache: MetadataCache, client_id: str) -> None:
        self.cache = cache
        self.client_id = client_id
        self.listener = config.control_listener_name
        protocol = config.security_protocol(self.listener)
        self.ssl: SSLContext | None = config.tls.client_context() if uses_tls(protocol) else None
        self.sasl: ClientCredential | None = config.cluster_credential if uses_sasl(protocol) else None
        self._conns: dict[int, tuple[KafkaConnection, dict[int, range]]] = {}
        self._opening: dict[int, asyncio.Lock] = {}

    async def send(self, broker: int, api_key: int, make: Callable[[int], Request[R]]) -> R:
        """``make(version)`` sent to ``broker`` at the highest version both speak; the
        network's errors (kmeta.server.to_controller.controller_connection.NET_ERRORS) drop the connection
        and propagate."""
        conn, versions = await self._connection(broker)
        version = highest_common(versions, api_key)
        if version is None:
            raise ConnectionError(f"broker {broker} does not serve api key {api_key}")
        try:
            return await call(conn, make(version))
        except BaseException:
            self.drop(broker)
            raise

    async def _connection(self, broker: int) -> tuple[KafkaConnection, dict[int, range]]:
        lock = self._opening.setdefault(broker, asyncio.Lock())
        async with lock:
            held = self._conns.get(broker)
            if held is not None and held[0].is_open:
                return held
            node = self.cache.snapshot.alive_node(broker, self.listener)
            if node is None:
                raise ConnectionError(f"broker {broker} has no {self.listener} listener alive")
            held = await open_connection(node.host, node.port, self.client_id, self.ssl, self.sasl)
            self._conns[broker] = held
            return held

    def drop(self, broker: int) -> None:
        held = self._conns.pop(broker, None)
        if held is not None:
            held[0].close()

    def close(self) -> None:
        for broker in list(self._conns):
            with contextlib.suppress(Exception):
                self.drop(broker)
