"""``DefaultMetadataUpdater``: when the client asks for metadata, whom, and what an answer does.

Kafka's ``NetworkClient.DefaultMetadataUpdater``, an inner class there, a collaborator of
``NetworkClient`` here: it sees the client only through ``UpdaterHost`` (the connections'
questions and the one way to open a connection), so how connections are made and watched stays
in ``NetworkClient`` and when to fetch metadata reads here on its own.

* ``maybe_update`` sends one Metadata request at a time, to ``least_loaded_node``, only when
  the metadata says an update is due; while any connection is being set up it starts no other.
* A failed or timed-out Metadata request is a failed update (the metadata's backoff grows); a
  timeout also closes that connection, since an in-order stream cannot skip the late answer.
* When no known node is usable and none is connected, the metadata rebootstraps (KIP-899).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from kmeta.client.config import ClientConfig
from kmeta.client.connection_states import ClusterConnectionStates, LeastLoadedNode
from kmeta.client.metadata import Metadata, MetadataRequestAndVersion
from kmeta.metadata.model import Node
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode, ProtocolError
from kmeta.protocol.messages import metadata

log = logging.getLogger(__name__)

#: poll() never sleeps longer than this, so a lost wake-up cannot stall the client
MAX_POLL_MS = 5_000


@dataclass(slots=True)
class ClientStats:
    connects: int = 0
    connect_failures: int = 0
    disconnects: int = 0
    metadata_requests: int = 0
    metadata_responses: int = 0
    metadata_failures: int = 0
    empty_responses: int = 0  # answers that listed no brokers (a broker still starting)
    rebootstraps: int = 0
    requests_by_node: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _InProgress:
    node_id: int
    request_version: int
    is_partial_update: bool


def build_metadata_request(
    version: int, wanted: MetadataRequestAndVersion, allow_auto_topic_creation: bool
) -> metadata.MetadataRequest:
    topics = (
        None
        if wanted.topics is None
        else tuple(metadata.MetadataRequestTopic(name=name) for name in wanted.topics)
    )
    return metadata.MetadataRequest(
        version=version, topics=topics, allow_auto_topic_creation=allow_auto_topic_creation
    )


class UpdaterHost(Protocol):
    """What ``DefaultMetadataUpdater`` uses of ``NetworkClient``."""

    config: ClientConfig
    metadata: Metadata
    states: ClusterConnectionStates
    stats: ClientStats
    last_error: BaseException | None

    def now_ms(self) -> int: ...
    def wakeup(self) -> None: ...
    def least_loaded_node(self, now_ms: int) -> LeastLoadedNode: ...
    def can_send_request(self, node_id: int) -> bool: ...
    def connection(self, node_id: int) -> KafkaConnection | None: ...
    def metadata_version(self, node_id: int) -> int | None: ...
    def initiate_connect(self, node: Node, now_ms: int) -> None: ...
    def spawn(self, coro: Coroutine[Any, Any, None]) -> None: ...
    def close_connections_to_unknown_nodes(self) -> None: ...


class DefaultMetadataUpdater:
    def __init__(self, host: UpdaterHost) -> None:
        self._host = host
        self._in_progress: _InProgress | None = None
        self.last_no_node_reason = ""

    def has_metadata_in_flight(self) -> bool:
        return self._in_progress is not None

    def maybe_update(self, now_ms: int) -> int:
        """Start a Metadata request or a connection if due; return ms until worth asking again."""
        host, config = self._host, self._host.config
        due_in = host.metadata.time_to_next_update(now_ms)
        wait_for_fetch = config.request_timeout_ms if self._in_progress else 0
        timeout = max(due_in, wait_for_fetch)
        if timeout > 0:
            return timeout
        chosen = host.least_loaded_node(now_ms)
        if (
            config.metadata_recovery_strategy == "rebootstrap"
            and not chosen.has_node_available_or_connection_ready
        ):
            log.info("no known node is reachable (%s); rebootstrapping", chosen.reason)
            host.stats.rebootstraps += 1
            host.metadata.rebootstrap()
            chosen = host.least_loaded_node(now_ms)
        if chosen.node is None:
            self.last_no_node_reason = chosen.reason
            log.debug("no node for a metadata request: %s", chosen.reason)
            return config.reconnect_backoff_ms
        return self._maybe_update_node(now_ms, chosen.node)

    def _maybe_update_node(self, now_ms: int, node: Node) -> int:
        host = self._host
        if host.can_send_request(node.id):
            self._send_metadata(node.id, now_ms)
            return host.config.request_timeout_ms
        if host.states.is_any_node_connecting():
            # wait for that connection rather than opening more (the connect wakes us)
            return host.config.reconnect_backoff_ms
        if host.states.can_connect(node.id, now_ms):
            host.initiate_connect(node, now_ms)
            return host.config.reconnect_backoff_ms
        return MAX_POLL_MS  # connected but saturated: a response will wake us

    def _send_metadata(self, node_id: int, now_ms: int) -> None:
        host = self._host
        conn, version = host.connection(node_id), host.metadata_version(node_id)
        # can_send_request said READY: the connection is open and its version negotiated
        assert conn is not None
        assert version is not None
        wanted = host.metadata.new_metadata_request(now_ms)
        request = build_metadata_request(version, wanted, host.config.allow_auto_topic_creation)
        future = conn.send(request)
        progress = _InProgress(node_id, wanted.request_version, wanted.is_partial_update)
        self._in_progress = progress
        host.stats.metadata_requests += 1
        host.stats.requests_by_node[node_id] = host.stats.requests_by_node.get(node_id, 0) + 1
        host.spawn(self._await_metadata(conn, future, progress))

    async def _await_metadata(
        self, conn: KafkaConnection, future: asyncio.Future[metadata.MetadataResponse], progress: _InProgress
    ) -> None:
        host = self._host
        try:
            async with asyncio.timeout(host.config.request_timeout_ms / 1000):
                response = await future
        except TimeoutError as exc:
            host.last_error = exc
            conn.close()  # an in-order stream cannot skip the late answer; triggers an update
            self._failed_metadata()
        except (ConnectionError, ProtocolError) as exc:
            host.last_error = exc
            self._failed_metadata()
        else:
            host.stats.metadata_responses += 1
            top_error = getattr(response, "error_code", ErrorCode.NONE)
            if top_error != ErrorCode.NONE:
                log.warning("metadata response carries error %s", top_error)
                self._failed_metadata()
            elif host.metadata.update(
                progress.request_version, response, progress.is_partial_update, host.now_ms()
            ):
                host.close_connections_to_unknown_nodes()
            else:
                host.stats.empty_responses += 1
        finally:
            if self._in_progress is progress:
                self._in_progress = None
            host.wakeup()

    def _failed_metadata(self) -> None:
        self._host.stats.metadata_failures += 1
        self._host.metadata.failed_update(self._host.now_ms())
