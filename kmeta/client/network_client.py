"""``NetworkClient``: connections to brokers and the metadata refresh loop.

Kafka's ``NetworkClient`` + ``DefaultMetadataUpdater`` on asyncio (the updater in
kmeta.client.metadata_updater: when to fetch, from whom, what an answer does). One background
task plays ``poll()``: it asks ``maybe_update(now)`` what to do and sleeps until the returned
time or a wake-up (an update was requested, a connection came up or went down, a response
arrived).

* Connections go DISCONNECTED -> CONNECTING -> CHECKING_API_VERSIONS -> READY; each READY
  connection has negotiated the highest Metadata version both sides speak (1..13).
* ``maybe_update`` sends one Metadata request at a time, to ``least_loaded_node``, only when
  the metadata says an update is due; while any connection is being set up it starts no other.
* Refresh triggers: a failed connect, a disconnection and a request timeout request an update;
  a failed or timed-out Metadata request is a failed update (backoff grows). When no known
  node is usable and none is connected, the metadata rebootstraps (KIP-899).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Coroutine
from typing import Any

from kmeta import __version__
from kmeta.client.config import MIN_METADATA_VERSION, ClientConfig
from kmeta.client.connection_states import (
    ClusterConnectionStates,
    LeastLoadedNode,
    least_loaded_node,
)
from kmeta.client.errors import ClientError
from kmeta.client.metadata import Metadata
from kmeta.client.metadata_updater import (
    MAX_POLL_MS,
    ClientStats,
    DefaultMetadataUpdater,
    build_metadata_request,
)
from kmeta.metadata.addresses import Address
from kmeta.metadata.model import Node
from kmeta.net.connection import KafkaConnection
from kmeta.net.security.sasl_client import authenticate
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode, ProtocolError
from kmeta.protocol.messages import api_versions
from kmeta.protocol.registry import highest_common, peer_versions

log = logging.getLogger(__name__)

_API_VERSIONS_VERSION = 3
_SOFTWARE_NAME = "kmeta"


__all__ = ["ClientStats", "NetworkClient", "UnsupportedBrokerError", "build_metadata_request"]


class UnsupportedBrokerError(ClientError):
    """The broker speaks no Metadata version the client does."""


class NetworkClient:
    def __init__(
        self,
        config: ClientConfig,
        metadata_: Metadata,
        *,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.metadata = metadata_
        self._clock = clock
        self._rng = rng or random.Random()
        self.states = ClusterConnectionStates(
            config.reconnect_backoff_ms, config.reconnect_backoff_max_ms, self._rng
        )
        self.stats = ClientStats()
        self.last_error: BaseException | None = None
        self._conns: dict[int, KafkaConnection] = {}
        self._metadata_versions: dict[int, int] = {}
        self._api_versions_v0: set[Address] = set()  # brokers older than KIP-511
        self._updater = DefaultMetadataUpdater(self)
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._closed = False
        metadata_.add_wakeup(self.wakeup)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        if self._runner is None:
            self._runner = asyncio.get_running_loop().create_task(self._run(), name="kmeta-poll")

    async def close(self) -> None:
        self._closed = True
        tasks = [*self._tasks, *([self._runner] if self._runner else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def wakeup(self) -> None:
        self._wake.set()

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    # -- questions -------------------------------------------------------------------------------
    def in_flight_count(self, node_id: int) -> int:
        conn = self._conns.get(node_id)
        return 0 if conn is None else conn.in_flight

    def connection(self, node_id: int) -> KafkaConnection | None:
        return self._conns.get(node_id)

    def ready_nodes(self) -> list[int]:
        """Ids of nodes with a READY connection."""
        return [n for n in self._conns if self.states.is_ready(n)]

    def metadata_version(self, node_id: int) -> int | None:
        """The Metadata version negotiated with a READY node."""
        return self._metadata_versions.get(node_id)

    def can_send_request(self, node_id: int) -> bool:
        conn = self._conns.get(node_id)
        return (
            self.states.is_ready(node_id)
            and conn is not None
            and conn.is_open
            and conn.in_flight < self.config.max_in_flight_requests_per_connection
        )

    def describe_problem(self) -> str:
        """Why no metadata has arrived, as far as the client can tell (for error messages)."""
        if self.stats.empty_responses:
            return f"{self.stats.empty_responses} Metadata answers listed no brokers"
        if self.last_error is not None:
            return f"last error: {self.last_error!r}"
        return self._updater.last_no_node_reason or "no answer yet"

    def has_metadata_in_flight(self) -> bool:
        return self._updater.has_metadata_in_flight()

    def least_loaded_node(self, now_ms: int) -> LeastLoadedNode:
        return least_loaded_node(
            self.metadata.cluster.nodes,
            self.states,
            self.in_flight_count,
            self.config.max_in_flight_requests_per_connection,
            now_ms,
            self._rng,
        )

    def maybe_update(self, now_ms: int) -> int:
        """Start a Metadata request or a connection if due; return ms until worth asking again."""
        return self._updater.maybe_update(now_ms)

    # -- connections -----------------------------------------------------------------------------
    def initiate_connect(self, node: Node, now_ms: int) -> None:
        self.states.connecting(node.id, now_ms, node.host)
        self.stats.connects += 1
        self.spawn(self._connect(node))

    async def _connect(self, node: Node) -> None:
        conn: KafkaConnection | None = None
        try:
            conn = await KafkaConnection.open(
                node.host,
                node.port,
                client_id=self.config.client_id,
                timeout_s=self.config.socket_connection_setup_timeout_ms / 1000,
                max_frame_size=self.config.max_response_size,
                ssl=self.config.ssl_context,
            )
            self.states.checking_api_versions(node.id)
            self._conns[node.id] = conn
            self._metadata_versions[node.id] = await self._negotiate(conn, node)
            if self.config.sasl_credential is not None:  # Kafka's order: ApiVersions, then SASL
                await authenticate(
                    conn, self.config.sasl_credential, self.config.request_timeout_ms / 1000
                )
            self.states.ready(node.id)
            self.spawn(self._watch_connection(node.id, conn))
        except (OSError, TimeoutError, ProtocolError, ClientError) as exc:
            log.info("connection to node %s at %s failed: %r", node.id, node.address, exc)
            self.last_error = exc
            self.stats.connect_failures += 1
            if conn is not None:
                conn.close()
                if self._conns.get(node.id) is conn:
                    del self._conns[node.id]
            if self.states.get(node.id) is not None:
                self.states.disconnected(node.id, self.now_ms())
            self.metadata.request_update()
        finally:
            self.wakeup()

    async def _negotiate(self, conn: KafkaConnection, node: Node) -> int:
        """ApiVersions; return the highest Metadata version both sides support."""
        timeout_s = self.config.request_timeout_ms / 1000
        address = Address(node.host, node.port)
        version = 0 if address in self._api_versions_v0 else _API_VERSIONS_VERSION
        request = api_versions.ApiVersionsRequest(
            version=version,
            client_software_name=_SOFTWARE_NAME,
            client_software_version=__version__,
        )
        try:
            response = await conn.request(request, timeout_s)
        except ProtocolError:
            # a broker without KIP-511 answers v0 to any version it does not know
            self._api_versions_v0.add(address)
            raise
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
            own = [k for k in response.api_keys if k.api_key == ApiKey.API_VERSIONS]
            retry = min(own[0].max_version, _API_VERSIONS_VERSION) if own else 0
            response = await conn.request(api_versions.ApiVersionsRequest(version=retry), timeout_s)
        if response.error_code != ErrorCode.NONE:
            raise UnsupportedBrokerError(f"ApiVersions failed with error {response.error_code}")
        ranges = peer_versions(response)
        if ApiKey.METADATA not in ranges:
            raise UnsupportedBrokerError(f"node {node.id} does not serve Metadata")
        ours = range(MIN_METADATA_VERSION, self.config.max_metadata_version + 1)
        chosen = highest_common(ranges, ApiKey.METADATA, ours)
        if chosen is None:
            theirs = ranges[ApiKey.METADATA]
            raise UnsupportedBrokerError(
                f"node {node.id} serves Metadata v{theirs.start}-{theirs.stop - 1}; the client "
                f"speaks v{ours.start}-{ours.stop - 1}"
            )
        return chosen

    async def _watch_connection(self, node_id: int, conn: KafkaConnection) -> None:
        await conn.wait_closed()
        if self._closed or self._conns.get(node_id) is not conn:
            return
        del self._conns[node_id]
        self._metadata_versions.pop(node_id, None)
        self.stats.disconnects += 1
        log.info("node %s disconnected: %s", node_id, conn.close_reason)
        self.states.disconnected(node_id, self.now_ms())
        self.metadata.request_update()
        self.wakeup()

    def close_connections_to_unknown_nodes(self) -> None:
        """Drop idle connections to nodes the new metadata no longer lists (e.g. bootstrap -1)."""
        known = self.metadata.cluster.nodes_by_id
        for node_id in [n for n, c in self._conns.items() if n not in known and not c.in_flight]:
            conn = self._conns.pop(node_id)
            self._metadata_versions.pop(node_id, None)
            self.states.remove(node_id)
            conn.close()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` as a task ``close()`` cancels."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- poll ------------------------------------------------------------------------------------
    async def _run(self) -> None:
        while not self._closed:
            self._wake.clear()
            try:
                timeout_ms = self.maybe_update(self.now_ms())
            except Exception:  # a bug here must not kill the client's only loop
                log.exception("metadata update step failed")
                timeout_ms = self.config.retry_backoff_max_ms
            timeout_ms = min(max(timeout_ms, 1), MAX_POLL_MS)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_ms / 1000):
                    await self._wake.wait()
