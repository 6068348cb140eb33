"""Zero-copy sends (kmeta.net.inbound.zerocopy) over real loopback TCP sockets."""

from __future__ import annotations

import gc
import os
import socket
import struct
from collections.abc import Iterator

import pytest

from kmeta.net.inbound import zerocopy

pytestmark = pytest.mark.skipif(not zerocopy.AVAILABLE, reason="memfd and sendfile are Linux only")

BIG = bytes(range(256)) * 1024  # 256 KiB, every byte position distinguishable


@pytest.fixture
def tcp_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(sender, receiver): a loopback TCP connection, the sender non-blocking like a
    transport's socket."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        sender = socket.create_connection(server.getsockname())
        receiver, _ = server.accept()
    sender.setblocking(False)
    yield sender, receiver
    sender.close()
    receiver.close()


def receive(sock: socket.socket, n: int) -> bytes:
    sock.settimeout(5)
    out = bytearray()
    while len(out) < n:
        data = sock.recv(n - len(out))
        assert data, "connection closed early"
        out += data
    return bytes(out)


def memfd_open(fd: int) -> bool:
    try:
        return "kmeta-answer" in os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return False


def test_only_large_pieces_become_spliceable() -> None:
    assert type(zerocopy.spliceable(b"x" * 100)) is bytes
    piece = zerocopy.spliceable(BIG)
    assert type(piece) is zerocopy.SpliceableBytes
    assert piece == BIG
    assert b"".join([b"a", piece]) == b"a" + BIG  # a bytes like any other


def test_the_memfd_holds_the_bytes_and_is_sealed_against_change() -> None:
    piece = zerocopy.SpliceableBytes(BIG)
    fd = piece.fileno()
    assert fd is not None
    assert piece.fileno() == fd  # made once
    assert os.pread(fd, len(BIG) + 1, 0) == BIG
    with pytest.raises(PermissionError):
        os.pwrite(fd, b"changed", 0)
    with pytest.raises(PermissionError):
        os.ftruncate(fd, 10)


def test_the_memfd_closes_with_its_piece() -> None:
    piece = zerocopy.SpliceableBytes(BIG)
    fd = piece.fileno()
    assert fd is not None
    assert memfd_open(fd)
    del piece
    gc.collect()
    assert not memfd_open(fd)


def test_everything_leaves_in_order_when_the_kernel_takes_it(tcp_pair: tuple[socket.socket, socket.socket]) -> None:
    sender, receiver = tcp_pair
    sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    chunks = [bytearray(b"head"), zerocopy.SpliceableBytes(BIG), b"middle", zerocopy.SpliceableBytes(BIG[::-1]), b"tail"]
    expected = b"".join(chunks)
    assert zerocopy.SocketWriter(sender).send(chunks) == []
    assert receive(receiver, len(expected)) == expected


def test_a_full_socket_hands_back_exactly_the_unsent_tail(tcp_pair: tuple[socket.socket, socket.socket]) -> None:
    sender, receiver = tcp_pair
    sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
    receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    big = zerocopy.SpliceableBytes(BIG * 8)  # 2 MiB: far more than both buffers hold
    chunks = [bytearray(b"frame-1"), big, b"frame-2"]
    expected = b"".join(chunks)
    rest = zerocopy.SocketWriter(sender).send(chunks)
    unsent = b"".join(bytes(r) for r in rest)
    assert 0 < len(unsent) < len(expected)
    assert expected.endswith(unsent)
    assert receive(receiver, len(expected) - len(unsent)) + unsent == expected


def test_a_reset_connection_hands_everything_back_without_raising(tcp_pair: tuple[socket.socket, socket.socket]) -> None:
    sender, receiver = tcp_pair
    receiver.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    receiver.close()  # RST: the transport meets the same error on what is handed back
    chunks = [bytearray(b"head"), zerocopy.SpliceableBytes(BIG)]
    rest = zerocopy.SocketWriter(sender).send(chunks)
    assert b"".join(bytes(r) for r in rest) == b"".join(chunks)
