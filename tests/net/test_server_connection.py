"""Server connections over real sockets: hostile input, ordering, limits, flow control, shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from kmeta.net import api_versions as api_versions_handler
from kmeta.net.connection import KafkaConnection
from kmeta.net.dispatch import HandlerRegistry, RequestContext
from kmeta.net.inbound.server_connection import ConnectionLimits
from kmeta.net.listener import Listener
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import api_versions as av
from kmeta.protocol.messages import metadata as md
from kmeta.server.broker import Broker
from tests.server.helpers import (
    PLAINTEXT,
    ConnectionPair,
    assert_healthy,
    broker_state,
    broker_with_topics,
    closed_by_peer,
    encode_frame,
    loopback_config,
    read_frame,
    update_metadata,
)


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    b = await broker_with_topics(50, connections_max_idle_ms=60_000)
    yield b
    await b.stop()


async def _healthy(port: int) -> None:
    await assert_healthy(port, "t1")


async def _open(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


def _truncated_body() -> bytes:
    """A complete frame whose body ends inside a topic name."""
    whole = encode_frame(md.MetadataRequest(version=1, topics=(md.MetadataRequestTopic(name="abcdef"),)), 1)
    body = whole[4:-3]
    return len(body).to_bytes(4, "big") + body


def _with_api_key(api_key: int) -> bytes:
    raw = bytearray(encode_frame(md.MetadataRequest(version=1, topics=()), 1))
    raw[4:6] = api_key.to_bytes(2, "big")
    return bytes(raw)


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"\x00\x00\x00\x05hello", id="garbage-frame"),
        pytest.param(b"\x47\x45\x54\x20/ HTTP/1.1\r\n\r\n", id="http"),
        pytest.param(b"\x80\x00\x00\x00", id="2GiB-length"),
        pytest.param(b"\x7f\xff\xff\xff" + b"x" * 100, id="over-max-frame"),
        pytest.param(b"\x00\x00\x00\x03\x00\x03\x00", id="truncated-header"),
        pytest.param(_truncated_body(), id="truncated-body"),
        pytest.param(_with_api_key(999), id="unknown-api-key"),
        pytest.param(_with_api_key(ApiKey.BROKER_HEARTBEAT), id="api-without-handler"),
    ],
)
async def test_hostile_input_closes_only_that_connection(broker: Broker, payload: bytes) -> None:
    port = broker.port(PLAINTEXT)
    reader, writer = await _open(port)
    writer.write(payload)
    assert await closed_by_peer(reader)
    writer.close()
    await _healthy(port)


async def test_version_outside_the_registry_closes(broker: Broker) -> None:
    port = broker.port(PLAINTEXT)
    reader, writer = await _open(port)
    raw = bytearray(encode_frame(md.MetadataRequest(version=1, topics=()), 5))
    raw[6:8] = (14).to_bytes(2, "big")  # Metadata v14
    writer.write(bytes(raw))
    assert await closed_by_peer(reader)
    writer.close()
    await _healthy(port)


async def test_partial_frame_waits_and_others_are_served(broker: Broker) -> None:
    port = broker.port(PLAINTEXT)
    reader, writer = await _open(port)
    whole = encode_frame(md.MetadataRequest(version=1, topics=()), 3)
    writer.write(whole[:7])
    await _healthy(port)
    writer.write(whole[7:])  # completing it gets the answer
    body = await read_frame(reader)
    assert int.from_bytes(body[:4], "big") == 3
    writer.close()


async def test_control_request_on_client_listener_over_tcp(broker: Broker) -> None:
    conn = await KafkaConnection.open("127.0.0.1", broker.port(PLAINTEXT))
    before = broker.cache.snapshot
    resp = await conn.request(update_metadata([], {}, controller_epoch=99), 5)
    assert resp.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert broker.cache.snapshot is before
    assert conn.is_open
    conn.close()
    await _healthy(broker.port(PLAINTEXT))


async def test_pipelined_frames_answered_in_order_with_one_write() -> None:
    pair = ConnectionPair(broker_state())
    frames = b"".join(
        pair.encode(md.MetadataRequest(version=12, topics=None) if i % 2 else av.ApiVersionsRequest(version=3, client_software_name="a", client_software_version="1"), i)
        for i in range(20)
    )
    answers = pair.raw(frames)
    assert len(pair.transport.written) == 1
    assert [int.from_bytes(a[:4], "big") for a in answers] == list(range(20))


async def _slow_metadata(ctx: RequestContext, request: object) -> object:
    await asyncio.sleep(0.05)
    return md.MetadataResponse(version=request.version)  # type: ignore[attr-defined]


async def test_async_handler_keeps_request_order() -> None:
    registry = HandlerRegistry()
    api_versions_handler.register(registry)
    registry.register(md.API, _slow_metadata)
    lst = Listener("PLAINTEXT", "127.0.0.1", 0, is_control=False, registry=registry, state=None)
    await lst.start()
    reader, writer = await _open(lst.port)
    writer.write(
        encode_frame(md.MetadataRequest(version=12, topics=None), 1)
        + encode_frame(av.ApiVersionsRequest(version=0), 2)
        + encode_frame(md.MetadataRequest(version=12, topics=None), 3)
        + encode_frame(av.ApiVersionsRequest(version=0), 4)
    )
    ids = [int.from_bytes((await read_frame(reader))[:4], "big") for _ in range(4)]
    assert ids == [1, 2, 3, 4]
    # graceful shutdown answers what was read, then closes
    writer.write(encode_frame(md.MetadataRequest(version=12, topics=None), 5))
    await asyncio.sleep(0.01)
    await lst.shutdown(2.0)
    assert int.from_bytes((await read_frame(reader))[:4], "big") == 5
    assert await closed_by_peer(reader)
    writer.close()


async def test_idle_connection_is_closed() -> None:
    b = Broker(loopback_config(1, connections_max_idle_ms=200))
    await b.start()
    try:
        reader, writer = await _open(b.port(PLAINTEXT))
        writer.write(encode_frame(av.ApiVersionsRequest(version=0), 1))
        await read_frame(reader)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        assert await closed_by_peer(reader, 3.0)
        assert 0.1 < loop.time() - t0 < 2.0
        writer.close()
    finally:
        await b.stop()


async def test_slow_reader_pauses_reading(broker: Broker) -> None:
    """A client that never reads: the broker stops reading it instead of buffering answers."""
    port = broker.port(PLAINTEXT)
    reader, writer = await _open(port)
    request = encode_frame(md.MetadataRequest(version=12, topics=None), 1)
    (conn,) = [c for lst in broker.listeners for c in lst.connections]
    for _ in range(400):
        writer.write(request * 10)
        await asyncio.sleep(0)
        if conn._flow is not None and conn._flow.write_paused:
            break
    for _ in range(100):
        await asyncio.sleep(0.01)
        if conn._flow is not None and conn._flow.reading_paused:
            break
    assert conn._flow is not None
    assert conn._flow.reading_paused
    handled = conn.requests_handled
    await asyncio.sleep(0.1)
    assert conn.requests_handled == handled  # nothing more is read while paused
    # reading resumes once the client drains its answers
    body = await read_frame(reader)
    assert int.from_bytes(body[:4], "big") == 1
    writer.transport.abort()
    await _healthy(port)


async def test_limits_default_to_kafka_values() -> None:
    limits = ConnectionLimits()
    assert limits.idle_timeout_s == 600.0
    assert limits.max_frame_size == 100 * 1024 * 1024
