"""A small real Kafka-protocol server for the client's tests: asyncio TCP on 127.0.0.1 answering
ApiVersions and Metadata (with kmeta's codecs) from a mutable in-test ``ClusterState``.

Several ``MiniBroker`` instances share one state, each with its own node id, so tests can
create topics, move leaders, and stop brokers while real clients talk to them.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode, ProtocolError
from kmeta.protocol.framing import FrameSplitter
from kmeta.protocol.header import (
    decode_request_header,
    encode_response_header,
    response_header_version,
)
from kmeta.protocol.messages import api_versions, metadata
from kmeta.protocol.registry import api_for


@dataclass
class PartitionState:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...] = ()
    error_code: int = 0


@dataclass
class TopicState:
    partitions: list[PartitionState]
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)
    is_internal: bool = False
    error_code: int = 0


@dataclass
class ClusterState:
    cluster_id: str = "mini-cluster"
    controller_id: int = -1
    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    topics: dict[str, TopicState] = field(default_factory=dict)

    def create_topic(self, name: str, partitions: int = 1, replication: int = 1) -> TopicState:
        ids = sorted(self.brokers) or [0]
        parts = []
        for p in range(partitions):
            replicas = tuple(ids[(p + i) % len(ids)] for i in range(min(replication, len(ids))))
            parts.append(PartitionState(replicas[0], 0, replicas, replicas))
        self.topics[name] = TopicState(parts)
        return self.topics[name]


class MiniBroker:
    def __init__(
        self,
        state: ClusterState,
        node_id: int,
        *,
        metadata_versions: tuple[int, int] = (0, 12),
        api_versions_max: int = 4,
    ) -> None:
        self.state = state
        self.node_id = node_id
        self.metadata_versions = metadata_versions
        self.api_versions_max = api_versions_max
        self.delay_s = 0.0  # answer delay for every request
        self.hang_metadata = False  # never answer Metadata (request-timeout tests)
        self.empty_brokers = False  # answer Metadata with no brokers (a broker still starting)
        self.only_self = False  # advertise only this broker
        self.requests: dict[int, int] = {}
        self.connections_accepted = 0
        self._server: asyncio.Server | None = None
        self._transports: set[asyncio.Transport] = set()
        self.port = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self, port: int = 0) -> MiniBroker:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Conn(self), "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]
        self.state.brokers[self.node_id] = ("127.0.0.1", self.port)
        return self

    async def stop(self) -> None:
        """Close the listener and every connection (the broker 'dies')."""
        if self._server is not None:
            self._server.close()
            for t in list(self._transports):
                t.abort()
            await self._server.wait_closed()
            self._server = None

    @property
    def metadata_requests(self) -> int:
        return self.requests.get(ApiKey.METADATA, 0)

    # -- answers ---------------------------------------------------------------------------------
    def answer(self, api_key: int, version: int, body: Any) -> Any | None:
        self.requests[api_key] = self.requests.get(api_key, 0) + 1
        if api_key == ApiKey.API_VERSIONS:
            keys = (
                api_versions.ApiVersion(
                    api_key=18, min_version=0, max_version=self.api_versions_max
                ),
                api_versions.ApiVersion(
                    api_key=3,
                    min_version=self.metadata_versions[0],
                    max_version=self.metadata_versions[1],
                ),
            )
            if version > self.api_versions_max:
                return api_versions.ApiVersionsResponse(
                    version=0, error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=keys[:1]
                )
            return api_versions.ApiVersionsResponse(version=version, api_keys=keys)
        if api_key == ApiKey.METADATA:
            if self.hang_metadata:
                return None
            return self._metadata(version, body)
        return None

    def _metadata(self, version: int, request: Any) -> Any:
        st = self.state
        brokers = (
            ()
            if self.empty_brokers
            else tuple(
                metadata.MetadataResponseBroker(node_id=i, host=h, port=p, rack=None)
                for i, (h, p) in sorted(st.brokers.items())
                if not self.only_self or i == self.node_id
            )
        )
        names = sorted(st.topics) if request.topics is None else [t.name for t in request.topics]
        topics = []
        for name in names:
            t = st.topics.get(name)
            if t is None:
                topics.append(
                    metadata.MetadataResponseTopic(
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name
                    )
                )
                continue
            parts = tuple(
                metadata.MetadataResponsePartition(
                    error_code=p.error_code,
                    partition_index=i,
                    leader_id=p.leader,
                    leader_epoch=p.leader_epoch,
                    replica_nodes=p.replicas,
                    isr_nodes=p.isr,
                    offline_replicas=p.offline,
                )
                for i, p in enumerate(t.partitions)
            )
            topics.append(
                metadata.MetadataResponseTopic(
                    error_code=t.error_code,
                    name=name,
                    topic_id=t.topic_id,
                    is_internal=t.is_internal,
                    partitions=parts,
                )
            )
        return metadata.MetadataResponse(
            version=version,
            brokers=brokers,
            cluster_id=st.cluster_id,
            controller_id=st.controller_id,
            topics=tuple(topics),
        )


class _Conn(asyncio.Protocol):
    def __init__(self, broker: MiniBroker) -> None:
        self.broker = broker
        self.splitter = FrameSplitter(1 << 20)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.broker._transports.add(transport)
        self.broker.connections_accepted += 1

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is not None:
            self.broker._transports.discard(self.transport)

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        try:
            for frame in self.splitter.feed(data):
                header, pos = decode_request_header(frame)
                api = api_for(header.api_key)
                version = header.api_version
                body = None
                if header.api_key != ApiKey.API_VERSIONS or version <= api.max_version:
                    body = api.request.decode(frame, version, pos)
                response = self.broker.answer(header.api_key, version, body)
                if response is None:
                    continue
                out = bytearray(4)
                encode_response_header(
                    header.correlation_id, response_header_version(header.api_key, version), out
                )
                api.response.encode_into(response, out)
                out[0:4] = (len(out) - 4).to_bytes(4, "big")
                if self.broker.delay_s:
                    asyncio.get_running_loop().call_later(
                        self.broker.delay_s, self._write, bytes(out)
                    )
                else:
                    self.transport.write(out)
        except ProtocolError:
            self.transport.close()

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)


async def start_cluster(n: int, **kwargs: Any) -> tuple[ClusterState, list[MiniBroker]]:
    state = ClusterState()
    brokers = [await MiniBroker(state, i + 1, **kwargs).start() for i in range(n)]
    state.controller_id = 1
    return state, brokers
