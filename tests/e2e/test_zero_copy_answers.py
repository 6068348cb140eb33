"""All-topics Metadata answers large enough to leave by sendfile (kmeta.net.inbound.zerocopy), over
real loopback sockets: the same bytes as the copying path, for fast and slow readers and for
librdkafka."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import ssl
from typing import Any

import pytest

from kmeta.net.inbound import zerocopy
from kmeta.net.listener import Listener
from kmeta.protocol.messages import metadata as md
from kmeta.server.broker import Broker
from kmeta.server.handlers import build_registry
from tests.server.helpers import PLAINTEXT, broker_with_topics, encode_frame

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not zerocopy.AVAILABLE, reason="memfd and sendfile are Linux only"),
]

TOPICS = 600  # x 4 partitions: an all-topics answer of ~80 KB, over zerocopy.MIN_SIZE


def _is_answer_file(fd: str) -> bool:
    try:
        return "kmeta-answer" in os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # the listing's own descriptor, closed already
        return False


def answer_memfds() -> int:
    """The sealed answer files this process holds open."""
    return sum(map(_is_answer_file, os.listdir("/proc/self/fd")))


def all_topics_frames(versions: tuple[int, ...]) -> bytes:
    return b"".join(
        encode_frame(md.MetadataRequest(version=v, topics=None if v else ()), correlation_id=i)
        for i, v in enumerate(versions)
    )


async def exchange(port: int, request: bytes, answers: int, *, slow: bool = False) -> bytes:
    """Send ``request``; return the raw bytes of ``answers`` framed answers. A slow reader
    shrinks its receive buffer and reads nothing for a while, so the broker's socket fills."""
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    if slow:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await loop.sock_connect(sock, ("127.0.0.1", port))
    await loop.sock_sendall(sock, request)
    if slow:
        await asyncio.sleep(0.3)
    out = bytearray()
    pos = 0
    try:
        while answers:
            while len(out) - pos >= 4 and len(out) - pos - 4 >= int.from_bytes(out[pos : pos + 4], "big"):
                pos += 4 + int.from_bytes(out[pos : pos + 4], "big")
                answers -= 1
                if not answers:
                    return bytes(out)
            data = await asyncio.wait_for(loop.sock_recv(sock, 1 << 20), 10)
            assert data, "the broker closed the connection"
            out += data
    finally:
        sock.close()
    return bytes(out)


async def test_zero_copy_answers_are_the_copying_answers_byte_for_byte() -> None:
    versions = (12, 12, 1, 9, 0, 13)  # pipelined: each answer behind the previous one
    broker = await broker_with_topics(TOPICS)
    (listener,) = (lst for lst in broker.listeners if lst.name == PLAINTEXT)
    zero_copy_info = listener.info
    try:
        # the same broker and snapshot, with connections that copy
        listener.info = dataclasses.replace(zero_copy_info, zero_copy=False)
        before = answer_memfds()
        expected = await exchange(broker.port(PLAINTEXT), all_topics_frames(versions), len(versions))
        assert answer_memfds() == before  # copying made no file
        listener.info = zero_copy_info
        got = await exchange(broker.port(PLAINTEXT), all_topics_frames(versions), len(versions))
        assert got == expected
        assert answer_memfds() > before  # the answers did leave by sendfile
        first = md.RESPONSE.decode(expected, 12, 4 + 4 + 1)
        assert len(first.topics) == TOPICS
        assert all(len(t.partitions) == 4 for t in first.topics)
    finally:
        await broker.stop()


async def test_a_slow_reader_gets_every_byte_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The socket fills mid-answer: the rest goes through the transport, then the next
    answers follow it (never overtaking it)."""
    handed_back: list[int] = []
    send = zerocopy.SocketWriter.send

    def spy(self: zerocopy.SocketWriter, chunks: Any) -> Any:
        rest = send(self, chunks)
        handed_back.append(sum(len(r) for r in rest))
        return rest

    monkeypatch.setattr(zerocopy.SocketWriter, "send", spy)
    versions = (12,) * 64 + (7,)  # ~5 MB of answers: more than the socket buffers hold
    broker = await broker_with_topics(TOPICS)
    try:
        fast = await exchange(broker.port(PLAINTEXT), all_topics_frames(versions), len(versions))
        handed_back.clear()
        slow = await exchange(broker.port(PLAINTEXT), all_topics_frames(versions), len(versions), slow=True)
        assert slow == fast
        assert any(handed_back), "the socket never filled: the test did not test the hand-back"
    finally:
        await broker.stop()


def _librdkafka_view(bootstrap: str) -> dict[str, int]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta = admin.list_topics(timeout=10)
    return {name: len(t.partitions) for name, t in meta.topics.items()}


async def test_librdkafka_reads_a_zero_copy_answer() -> None:
    broker = await broker_with_topics(TOPICS)
    try:
        view = await asyncio.to_thread(_librdkafka_view, f"127.0.0.1:{broker.port(PLAINTEXT)}")
        assert view == {f"t{i}": 4 for i in range(TOPICS)}
    finally:
        await broker.stop()


def test_tls_listeners_never_splice() -> None:
    context: Any = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    registry = build_registry()
    tls = Listener("SSL", "127.0.0.1", 0, is_control=False, registry=registry, state=None, ssl=context)
    plain = Listener(PLAINTEXT, "127.0.0.1", 0, is_control=False, registry=registry, state=None)
    off = Listener(PLAINTEXT, "127.0.0.1", 0, is_control=False, registry=registry, state=None, zero_copy=False)
    assert (tls.info.zero_copy, plain.info.zero_copy, off.info.zero_copy) == (False, True, False)


def test_broker_config_reaches_the_listeners() -> None:
    from tests.server.helpers import loopback_config

    assert all(lst.info.zero_copy for lst in Broker(loopback_config(1)).listeners)
    assert not any(lst.info.zero_copy for lst in Broker(loopback_config(1, zero_copy=False)).listeners)
