"""Test helpers: UpdateMetadata builders and an in-memory client/server pair (no socket)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kmeta.net.connection import KafkaConnection, api_of_instance
from kmeta.net.inbound.server_connection import ConnectionLimits, ServerConnection, ServingInfo
from kmeta.protocol.framing import FrameSplitter, frame
from kmeta.protocol.header import (
    RequestHeader,
    decode_response_header,
    encode_request_header,
    response_header_version,
)
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.messages import update_metadata as um
from kmeta.server.broker import Broker
from kmeta.server.config import BrokerConfig, ListenerSpec
from kmeta.server.handlers import build_registry
from kmeta.server.state import BrokerState

PLAINTEXT, CONTROL, EXTERNAL = "PLAINTEXT", "CONTROL", "EXTERNAL"


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


def live_broker(broker_id: int, listeners: dict[str, tuple[str, int]], rack: str | None = None) -> Any:
    endpoints = tuple(
        um.UpdateMetadataEndpoint(port=port, host=host, listener=name, security_protocol=0)
        for name, (host, port) in listeners.items()
    )
    return um.UpdateMetadataBroker(id=broker_id, endpoints=endpoints, rack=rack)


def partition(index: int, leader: int, replicas: tuple[int, ...], isr: tuple[int, ...] | None = None,
              leader_epoch: int = 1, offline: tuple[int, ...] = (), controller_epoch: int = 1) -> Any:
    return um.UpdateMetadataPartitionState(
        partition_index=index, controller_epoch=controller_epoch, leader=leader,
        leader_epoch=leader_epoch, isr=replicas if isr is None else isr, zk_version=0,
        replicas=replicas, offline_replicas=offline,
    )  # fmt: skip


def update_metadata(
    brokers: list[Any],
    topics: dict[str, list[Any]],
    *,
    controller_id: int = 1,
    controller_epoch: int = 1,
    broker_epoch: int = -1,
    version: int = 8,
) -> Any:
    return um.UpdateMetadataRequest(
        version=version,
        controller_id=controller_id,
        controller_epoch=controller_epoch,
        broker_epoch=broker_epoch,
        topic_states=tuple(
            um.UpdateMetadataTopicState(topic_name=name, topic_id=topic_id(name), partition_states=tuple(parts))
            for name, parts in topics.items()
        ),
        live_brokers=tuple(brokers),
    )


class MemoryTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closed = False
        self.reading = True
        #: set at every write (a test awaiting an answer that comes later)
        self.wrote = asyncio.Event()

    def write(self, data: Any) -> None:
        self.written.append(bytes(data))
        self.wrote.set()

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default


def broker_state(broker_id: int = 1, cluster_id: str = "kmeta-test") -> BrokerState:
    spec = ListenerSpec(PLAINTEXT, "127.0.0.1", 0)
    ctl = ListenerSpec(CONTROL, "127.0.0.1", 0)
    return BrokerState(BrokerConfig(broker_id=broker_id, listeners=(spec, ctl), cluster_id=cluster_id))


class ConnectionPair:
    """A ServerConnection fed in memory: request objects in, decoded responses out."""

    def __init__(
        self, state: BrokerState, listener: str = PLAINTEXT, is_control: bool = False, modules: tuple[str, ...] | None = None
    ) -> None:
        registry = build_registry() if modules is None else build_registry(modules)
        info = ServingInfo(listener, is_control, registry, state, ConnectionLimits())
        self.server = ServerConnection(info, lambda _c: None)
        self.transport = MemoryTransport()
        self.server.connection_made(self.transport)
        self._next = 0

    def encode(self, request: Any, correlation_id: int | None = None) -> bytes:
        api = api_of_instance(request)
        if correlation_id is None:
            correlation_id = self._next
            self._next += 1
        out = bytearray()
        encode_request_header(RequestHeader(api.key, request.version, correlation_id, "test"), out)
        api.request.encode_into(request, out)
        return frame(out)

    def raw(self, data: bytes) -> list[bytes]:
        """Feed bytes; return the frames written back."""
        before = len(self.transport.written)
        self.server.data_received(data)
        splitter = FrameSplitter()
        return [f for chunk in self.transport.written[before:] for f in splitter.feed(chunk)]

    def decode(self, request: Any, payload: bytes, version: int | None = None) -> Any:
        api = api_of_instance(request)
        v = request.version if version is None else version
        _, pos = decode_response_header(payload, response_header_version(api.key, v))
        return api.response.decode(payload, v, pos)

    def request(self, request: Any) -> Any:
        frames = self.raw(self.encode(request))
        assert len(frames) == 1, frames
        return self.decode(request, frames[0])

    async def request_awaited(self, request: Any, timeout_s: float = 5.0) -> Any:
        """As :meth:`request`, for a handler that answers later (it awaits something)."""
        before = len(self.transport.written)
        self.transport.wrote.clear()
        self.server.data_received(self.encode(request))
        async with asyncio.timeout(timeout_s):
            await self.transport.wrote.wait()
        frames = [f for chunk in self.transport.written[before:] for f in FrameSplitter().feed(chunk)]
        assert len(frames) == 1, frames
        return self.decode(request, frames[0])

    def close(self) -> None:
        self.server.connection_lost(None)


#: brokers 1-3 alive, on PLAINTEXT, EXTERNAL and CONTROL (1 has rack r1; 3 lacks EXTERNAL)
THREE_BROKERS = [
    live_broker(1, {PLAINTEXT: ("h1", 9001), EXTERNAL: ("x1", 19001), CONTROL: ("h1", 9101)}, rack="r1"),
    live_broker(2, {PLAINTEXT: ("h2", 9002), EXTERNAL: ("x2", 19002), CONTROL: ("h2", 9102)}),
    live_broker(3, {PLAINTEXT: ("h3", 9003), CONTROL: ("h3", 9103)}),
]


def serving(topics: dict[str, list[Any]], **update: Any) -> tuple[ConnectionPair, ConnectionPair]:
    """A broker given THREE_BROKERS and ``topics`` by an UpdateMetadata on its control
    listener (``update``: update_metadata's keywords); client pairs on PLAINTEXT and EXTERNAL."""
    state = broker_state()
    ctl = ConnectionPair(state, CONTROL, is_control=True)
    assert ctl.request(update_metadata(THREE_BROKERS, topics, **update)).error_code == 0
    return ConnectionPair(state, PLAINTEXT), ConnectionPair(state, EXTERNAL)


# -- real sockets ---------------------------------------------------------------------------


def loopback_config(broker_id: int, **kw: Any) -> BrokerConfig:
    return BrokerConfig(
        broker_id=broker_id,
        listeners=(ListenerSpec(PLAINTEXT, "127.0.0.1", 0), ListenerSpec(CONTROL, "127.0.0.1", 0)),
        cluster_id="kmeta-test",
        **kw,
    )


async def push_update_metadata(
    brokers: list[Broker], topics: dict[str, list[Any]], *, controller_epoch: int = 1
) -> None:
    """What the controller (id 1) would send: ``brokers`` alive on PLAINTEXT, ``topics``; sent
    to each one's CONTROL listener, and each must accept it."""
    live = [live_broker(b.config.broker_id, {PLAINTEXT: ("127.0.0.1", b.port(PLAINTEXT))}) for b in brokers]
    request = update_metadata(live, topics, controller_id=1, controller_epoch=controller_epoch)
    for b in brokers:
        conn = await KafkaConnection.open("127.0.0.1", b.port(CONTROL))
        assert (await conn.request(request, 5)).error_code == 0
        conn.close()


async def broker_with_topics(topics: int = 50, **kw: Any) -> Broker:
    """A started broker 1 holding ``t0`` .. ``t<topics - 1>``, four partitions each, led by it."""
    b = Broker(loopback_config(1, **kw))
    await b.start()
    ctl = await KafkaConnection.open("127.0.0.1", b.port(CONTROL))
    brokers = [live_broker(1, {PLAINTEXT: ("127.0.0.1", b.port(PLAINTEXT))})]
    names = {f"t{i}": [partition(p, 1, (1,)) for p in range(4)] for i in range(topics)}
    assert (await ctl.request(update_metadata(brokers, names))).error_code == 0
    ctl.close()
    return b


async def assert_healthy(port: int, topic: str) -> None:
    """Another connection still gets correct answers: ``topic`` with partitions 0-3."""
    conn = await KafkaConnection.open("127.0.0.1", port)
    resp = await conn.request(md.MetadataRequest(version=12, topics=(md.MetadataRequestTopic(name=topic),)), 5)
    assert [t.name for t in resp.topics] == [topic]
    assert [p.partition_index for p in resp.topics[0].partitions] == [0, 1, 2, 3]
    conn.close()


def encode_frame(request: Any, correlation_id: int, api_key: int | None = None) -> bytes:
    api = api_of_instance(request)
    out = bytearray()
    key = api.key if api_key is None else api_key
    encode_request_header(RequestHeader(key, request.version, correlation_id, "raw"), out)
    api.request.encode_into(request, out)
    return frame(out)


async def read_frame(reader: asyncio.StreamReader, timeout_s: float = 5.0) -> bytes:
    size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), timeout_s), "big")
    return await asyncio.wait_for(reader.readexactly(size), timeout_s)


async def closed_by_peer(reader: asyncio.StreamReader, timeout_s: float = 5.0) -> bool:
    """True when the server closes the connection without sending anything more."""
    data = await asyncio.wait_for(reader.read(65536), timeout_s)
    return data == b""
