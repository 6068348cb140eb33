"""Hostile clients against a real broker over 127.0.0.1, each with a defined outcome.

Garbage, truncated frames, giant sizes and unknown api keys are in
tests/net/test_server_connection.py; this file covers the rest of the list. Every test also
checks that another connection keeps getting correct answers.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.header import decode_response_header
from kmeta.protocol.messages import api_versions as av
from kmeta.protocol.messages import metadata as md
from kmeta.server.broker import Broker
from tests.server.helpers import (
    CONTROL,
    PLAINTEXT,
    assert_healthy,
    broker_with_topics,
    closed_by_peer,
    encode_frame,
    read_frame,
)

TOPICS = 50


async def _start(**kw: Any) -> Broker:
    return await broker_with_topics(TOPICS, **kw)


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    b = await _start(connections_max_idle_ms=60_000, request_timeout_ms=300, write_timeout_ms=500)
    yield b
    await b.stop()


async def _healthy(port: int) -> None:
    await assert_healthy(port, "t7")


async def _open(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return reader, writer


def _server_conns(b: Broker, name: str = PLAINTEXT) -> list[Any]:
    return [c for lst in b.listeners if lst.name == name for c in lst.connections]


async def _server_side(b: Broker, writer: asyncio.StreamWriter) -> Any:
    """The broker's end of the connection ``writer`` writes to (once accepted; the health
    checks open others)."""
    ours = writer.get_extra_info("sockname")
    for _ in range(200):
        found = [c for c in _server_conns(b) if c.peer == ours]
        if found:
            return found[0]
        await asyncio.sleep(0.01)
    raise AssertionError(f"the broker never accepted the connection from {ours}")


def _metadata_v12(topic: str = "t3", correlation_id: int = 1) -> bytes:
    return encode_frame(md.MetadataRequest(version=12, topics=(md.MetadataRequestTopic(name=topic),)), correlation_id)


def _corrupt_bodies() -> dict[str, bytes]:
    ok = _metadata_v12()
    # v12 header: size(4) key(2) version(2) correlation(4) client id(2+3 "raw") tags(1) = 18
    body_at = 18
    assert ok[body_at] == 2  # compact array of 1 topic
    out = {}
    huge_count = bytearray(ok)
    huge_count[body_at : body_at + 1] = b"\xff\xff\xff\xff\x0f"  # 2^32-1 topics
    out["huge-array-count"] = bytes(huge_count)
    bad_varint = bytearray(ok)
    bad_varint[body_at : body_at + 1] = b"\xff" * 6  # a uvarint longer than 5 bytes
    out["overlong-varint"] = bytes(bad_varint)
    # the topic name claims 200 bytes inside a 30-byte frame
    name_len = bytearray(ok)
    name_len[body_at + 17] = 201
    out["string-past-the-end"] = bytes(name_len)
    for name, raw in out.items():
        out[name] = (len(raw) - 4).to_bytes(4, "big") + raw[4:]
    return out


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"\x00\x00\x00\x00", id="zero-length"),
        pytest.param(b"\x00\x00\x00\x00" * 50, id="many-zero-length"),
        *(pytest.param(raw, id=name) for name, raw in _corrupt_bodies().items()),
    ],
)
async def test_malformed_frames_close_only_that_connection(broker: Broker, payload: bytes) -> None:
    port = broker.port(PLAINTEXT)
    reader, writer = await _open(port)
    writer.write(payload)
    assert await closed_by_peer(reader)
    writer.close()
    await _healthy(port)


async def test_unknown_tagged_fields_are_skipped(broker: Broker) -> None:
    """Kafka ignores tags it does not know: the request is answered, the connection stays."""
    raw = bytearray(_metadata_v12("t5"))
    assert raw[-1] == 0  # the body's empty tag section
    raw[-1:] = b"\x01" + b"\x63" + b"\x03" + b"abc"  # one tag: 99 -> 3 bytes
    raw[:4] = (len(raw) - 4).to_bytes(4, "big")
    port = broker.port(PLAINTEXT)
    reader, writer = await _open(port)
    writer.write(bytes(raw) + _metadata_v12("t6", 2))
    for cid, topic in ((1, "t5"), (2, "t6")):
        body = await read_frame(reader)
        got, pos = decode_response_header(body, 1)
        assert got == cid
        assert md.RESPONSE.decode(body, 12, pos).topics[0].name == topic
    writer.close()
    await _healthy(port)


async def test_request_split_byte_by_byte(broker: Broker) -> None:
    port = broker.port(PLAINTEXT)
    reader, writer = await _open(port)
    whole = _metadata_v12("t9", 42) + encode_frame(av.ApiVersionsRequest(version=0), 43)
    for i in range(len(whole)):
        writer.write(whole[i : i + 1])
        await writer.drain()
        await asyncio.sleep(0)
        if i == 10:
            await _healthy(port)
    body = await read_frame(reader)
    cid, pos = decode_response_header(body, 1)
    resp = md.RESPONSE.decode(body, 12, pos)
    assert cid == 42
    assert resp.topics[0].name == "t9"
    assert len(resp.topics[0].partitions) == 4
    assert int.from_bytes((await read_frame(reader))[:4], "big") == 43
    writer.close()


async def test_10k_pipelined_requests_answered_in_order() -> None:
    # default write timeout: a busy CI box may pause our reading for a while
    broker = await _start()
    try:
        await _pipeline_10k(broker)
    finally:
        await broker.stop()


async def _pipeline_10k(broker: Broker) -> None:
    port = broker.port(PLAINTEXT)
    reader, writer = await _open(port)
    conn = await _server_side(broker, writer)
    n = 10_000
    requests = [
        _metadata_v12(f"t{i % TOPICS}", i) if i % 2 else encode_frame(av.ApiVersionsRequest(version=0), i)
        for i in range(n)
    ]
    writer.write(b"".join(requests))
    await _healthy(port)
    for i in range(n):
        body = await read_frame(reader)
        if i % 2:
            cid, pos = decode_response_header(body, 1)
            assert cid == i
            if i % 1000 == 1:
                assert md.RESPONSE.decode(body, 12, pos).topics[0].name == f"t{i % TOPICS}"
        else:
            assert int.from_bytes(body[:4], "big") == i
    assert conn.requests_handled == n
    writer.close()


async def test_client_that_never_reads_is_bounded_then_cut_off(broker: Broker) -> None:
    """Reading pauses (memory bounded), and after write_timeout the connection is aborted."""
    port = broker.port(PLAINTEXT)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.setblocking(False)
    request = encode_frame(md.MetadataRequest(version=12, topics=None), 1)  # ~3 KiB answers
    burst = request * 2000  # 2000 answers of every topic: several MiB if buffered
    for _ in range(200):
        if _server_conns(broker):
            break
        await asyncio.sleep(0.01)
    (conn,) = _server_conns(broker)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    sent = 0
    peak = 0
    while loop.time() - t0 < 3.0 and not conn.closed.done():
        try:
            sent += sock.send(burst[sent % len(burst) :])
        except BlockingIOError:
            pass
        except OSError:
            break  # the broker aborted us
        transport = conn._transport
        if transport is not None and not transport.is_closing():
            peak = max(peak, transport.get_write_buffer_size())
        await asyncio.sleep(0.005)
    assert conn.closed.done(), "the broker never cut off a client that does not read"
    assert loop.time() - t0 < 2.5  # write timeout is 0.5 s
    handled = conn.requests_handled
    assert handled < sent // len(request)  # it stopped reading: most requests never handled
    assert peak < 4 * 1024 * 1024, peak  # bounded: high-water mark plus one flush (1 MiB)
    sock.close()
    await _healthy(port)


async def test_partial_frame_is_closed_after_the_request_timeout(broker: Broker) -> None:
    port = broker.port(PLAINTEXT)
    idle_reader, idle_writer = await _open(port)  # idle, nothing started: stays open
    reader, writer = await _open(port)
    writer.write(_metadata_v12()[:9])
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await closed_by_peer(reader, 3.0)
    assert 0.2 < loop.time() - t0 < 2.0  # request timeout is 0.3 s, idle timeout 60 s
    idle_writer.write(encode_frame(av.ApiVersionsRequest(version=0), 7))
    assert int.from_bytes((await read_frame(idle_reader))[:4], "big") == 7
    for w in (writer, idle_writer):
        w.close()
    await _healthy(port)


async def test_slow_but_steady_request_is_not_cut(broker: Broker) -> None:
    """The request timeout restarts whenever a frame completes: steady pipelining is fine."""
    port = broker.port(PLAINTEXT)
    reader, writer = await _open(port)
    stream = b"".join(_metadata_v12("t1", i) for i in range(12))
    step = len(stream) // 12 + 7  # every write ends inside a frame
    for pos in range(0, len(stream), step):
        writer.write(stream[pos : pos + step])
        await asyncio.sleep(0.1)  # 1.2 s in all, over the 0.3 s request timeout
    ids = [decode_response_header(await read_frame(reader), 1)[0] for _ in range(12)]
    assert ids == list(range(12))
    writer.close()


async def _refused(reader: asyncio.StreamReader) -> bool:
    try:
        return await closed_by_peer(reader, 2.0)
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("limit", ["max_connections", "max_connections_per_ip"])
async def test_connection_flood_is_refused_at_accept(limit: str) -> None:
    b = await _start(**{limit: 5})
    try:
        port = b.port(PLAINTEXT)
        kept = [await _open(port) for _ in range(5)]
        await asyncio.sleep(0.05)
        flood = [await _open(port) for _ in range(10)]
        assert all([await _refused(r) for r, _ in flood])
        (lst,) = [x for x in b.listeners if x.name == PLAINTEXT]
        assert lst.refused == 10
        for i, (r, w) in enumerate(kept):  # the admitted ones keep correct answers
            w.write(encode_frame(av.ApiVersionsRequest(version=0), i))
            assert int.from_bytes((await read_frame(r))[:4], "big") == i
        # the control listener has its own budget: the controller is never locked out
        ctl = await KafkaConnection.open("127.0.0.1", b.port(CONTROL))
        assert (await ctl.request(av.ApiVersionsRequest(version=3, client_software_name="c", client_software_version="1"))).error_code == 0
        ctl.close()
        # a slot freed is a slot available again
        _, w0 = kept.pop()
        w0.close()
        for _ in range(100):
            if len(lst.connections) < 5:
                break
            await asyncio.sleep(0.01)
        await _healthy(port)
        for _, w in kept + flood:
            w.close()
    finally:
        await b.stop()
