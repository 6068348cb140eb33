"""Zero-copy sends of large cached answer pieces: sendfile(2) from a sealed memfd.

An all-topics Metadata answer for 1000 topics x 10 partitions is ~450 KB, spliced from
cached blocks at almost no cost; copying it from user space into the socket then costs the
broker more CPU than everything else (about 40 % of its CPU per answer, measured with perf:
``_copy_from_iter`` under ``tcp_sendmsg``). A :class:`SpliceableBytes` is an ordinary
``bytes`` that every other path uses as such, and that can also lend the kernel its pages:
on its first zero-copy send its content is written once into a memfd that is then sealed
against any change (pages handed to a socket must never change under the peer), and every
send after that is a ``sendfile`` from it. The memfd closes when the piece dies, with the
snapshot that cached it.

:class:`SocketWriter` is only used on plain TCP sockets (TLS encrypts in user space) and
only while the transport's own buffer is empty, so nothing can overtake what the transport
holds; what the kernel does not take at once is returned, and the caller hands it to the
transport like any other answer.
"""

from __future__ import annotations

import os
import socket
import sys
import weakref
from _socket import socket as _RawSocket
from collections.abc import Sequence
from typing import Protocol

#: Linux only: memfd_create and sealing (sendfile from a shmem file is zero-copy there)
AVAILABLE = sys.platform == "linux" and hasattr(os, "memfd_create") and hasattr(os, "sendfile")
#: smaller pieces are not worth a file descriptor: they are copied
MIN_SIZE = 64 * 1024
_IOV_MAX = 512  # chunks per call (Linux takes up to 1024 buffers in one sendmsg)

Chunk = bytes | bytearray | memoryview


class _SealedFile:
    """A memfd holding ``data``, sealed (no write, no resize, no unsealing), closed with this
    object."""

    __slots__ = ("__weakref__", "fd")

    def __init__(self, data: bytes) -> None:
        import fcntl  # Linux only, like AVAILABLE

        fd = os.memfd_create("kmeta-answer", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            view, written = memoryview(data), 0
            while written < len(data):
                written += os.write(fd, view[written:])
            seals = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        weakref.finalize(self, os.close, fd)


class SpliceableBytes(bytes):
    """``bytes`` that can be sent with sendfile (see the module docstring)."""

    _file: _SealedFile | None = None
    _unavailable = False  # the memfd could not be made: this piece is copied like any other

    def fileno(self) -> int | None:
        """The sealed memfd with this content, made on first use; None if it cannot be."""
        if self._file is None:
            if self._unavailable or not AVAILABLE:
                return None
            try:
                self._file = _SealedFile(self)
            except OSError:  # out of descriptors or memory: fall back to copying
                self._unavailable = True
                return None
        return self._file.fd


def spliceable(data: bytes) -> bytes:
    """``data`` as a :class:`SpliceableBytes` when it is large enough to be worth it."""
    return SpliceableBytes(data) if len(data) >= MIN_SIZE else data


class TransportSocket(Protocol):
    """What a transport's ``get_extra_info("socket")`` gives (a socket.socket, uvloop's
    PseudoSocket), as far as :class:`SocketWriter` reads it."""

    family: int
    type: int
    proto: int

    def fileno(self) -> int: ...


class SocketWriter:
    """Direct, non-blocking writes to a transport's plain TCP socket. The transport keeps
    owning it: the socket object made for each call is detached, never closed. (It is the C
    type: ``socket.socket``'s Python ``__init__`` costs ~3 us a call, ``_socket``'s ~0.4.)"""

    __slots__ = ("_family", "_fd", "_proto", "_type")

    def __init__(self, sock: TransportSocket) -> None:
        """``sock``: the transport's ``get_extra_info("socket")``."""
        self._fd: int = sock.fileno()
        self._family: int = sock.family
        self._type: int = sock.type
        self._proto: int = sock.proto

    def send(self, chunks: Sequence[Chunk]) -> list[Chunk]:
        """Write ``chunks`` in order while the kernel takes them; return what it did not take
        (the tail, its first chunk cut where the kernel stopped)."""
        if len(chunks) > _IOV_MAX:
            return list(chunks)
        sock = _RawSocket(self._family, self._type, self._proto, self._fd)
        try:
            sent = self._send(sock, chunks)
        finally:
            sock.detach()
        return _unsent(chunks, sent)

    def _send(self, sock: _RawSocket, chunks: Sequence[Chunk]) -> int:
        """Spliceable pieces by sendfile; the chunks between them by one sendmsg each, with
        MSG_MORE so that a frame's few header bytes leave in one segment with its body.
        Returns how many bytes the kernel took."""
        sent, run, run_size = 0, [], 0
        try:
            for chunk in chunks:
                file = chunk.fileno() if isinstance(chunk, SpliceableBytes) else None
                if file is None:
                    run.append(chunk)
                    run_size += len(chunk)
                    continue
                if run:
                    taken = sock.sendmsg(run, (), socket.MSG_MORE)
                    sent += taken
                    if taken < run_size:
                        return sent
                    run, run_size = [], 0
                start, end = sent, sent + len(chunk)
                while sent < end:
                    sent += os.sendfile(self._fd, file, sent - start, end - sent)
            if run:
                sent += sock.sendmsg(run)
        except OSError:
            # Full socket buffer (EAGAIN) -- or a broken connection, which the transport
            # meets again on the remainder and handles as any failed write.
            return sent
        return sent


def _unsent(chunks: Sequence[Chunk], sent: int) -> list[Chunk]:
    for i, chunk in enumerate(chunks):
        if sent < len(chunk):
            rest = list(chunks[i:])
            if sent:
                rest[0] = memoryview(chunk)[sent:]
            return rest
        sent -= len(chunk)
    return []
