"""A trivial framed echo server: the ceiling for kmeta's request path on this machine.

It splits frames exactly as the broker does and answers each frame with the correlation id
followed by the rest of the request (one write per read, like the broker), with no decoding.
With ``reply_size`` it answers the correlation id followed by a fixed payload of that size
instead (the floor for large answers: the kernel's copy, with nothing to build); with
``zero_copy`` too, it sends that payload the way the broker sends its all-topics answers
(sendfile from a sealed memfd, :mod:`kmeta.net.inbound.zerocopy`): the floor of the kernel's work
for the broker's own path. Run it in its own process with :func:`serve_in_process`.
"""

from __future__ import annotations

import asyncio
import os
from multiprocessing.connection import Connection

from kmeta.net.inbound import zerocopy
from kmeta.protocol.framing import FrameSplitter


class EchoProtocol(asyncio.Protocol):
    def __init__(self, reply: bytes | None = None) -> None:
        self._splitter = FrameSplitter()
        self._transport: asyncio.Transport | None = None
        self._reply = reply
        self._writer: zerocopy.SocketWriter | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        if isinstance(self._reply, zerocopy.SpliceableBytes):
            self._writer = zerocopy.SocketWriter(transport.get_extra_info("socket"))

    def data_received(self, data: bytes) -> None:
        if self._reply is not None:
            self._fixed(self._splitter.feed(data), self._reply)
            return
        out = bytearray()
        for frame in self._splitter.feed(data):
            body = frame[4:8] + frame[8:]  # correlation id, then the echoed request
            out += len(body).to_bytes(4, "big")
            out += body
        if out and self._transport is not None:
            self._transport.write(out)

    def _fixed(self, frames: list[bytes], reply: bytes) -> None:
        # like the broker's large answers: small pieces joined, the big payload not copied
        if self._transport is None:
            return
        pieces: list[zerocopy.Chunk] = []
        for frame in frames:
            pieces.append((len(reply) + 4).to_bytes(4, "big") + frame[4:8])
            pieces.append(reply)
        if not pieces:
            return
        if self._writer is not None and not self._transport.get_write_buffer_size():
            pieces = self._writer.send(pieces)  # as the broker's AnswerWriter.write does
        if pieces:
            self._transport.writelines(pieces)


def fixed_reply(size: int, zero_copy: bool = False) -> bytes | None:
    """The payload of a fixed-answer echo (None: echo the requests)."""
    if not size:
        return None
    return zerocopy.SpliceableBytes(bytes(size)) if zero_copy else bytes(size)


async def _serve(conn: Connection, reply_size: int = 0, zero_copy: bool = False) -> None:
    loop = asyncio.get_running_loop()
    reply = fixed_reply(reply_size, zero_copy)
    server = await loop.create_server(lambda: EchoProtocol(reply), "127.0.0.1", 0)
    conn.send({"PLAINTEXT": server.sockets[0].getsockname()[1]})
    await serve_commands(conn)
    server.close()


async def serve_commands(conn: Connection) -> None:
    """Answer "cpu" with this process's (user, system) CPU seconds until "stop"."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_command() -> None:
        msg = conn.recv()
        if msg == "cpu":
            t = os.times()
            conn.send((t.user, t.system))
        elif msg == "stop":
            stop.set()

    loop.add_reader(conn.fileno(), on_command)
    await stop.wait()
    loop.remove_reader(conn.fileno())


def serve_in_process(conn: Connection, reply_size: int = 0, zero_copy: bool = False) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(_serve(conn, reply_size, zero_copy))
    else:
        uvloop.run(_serve(conn, reply_size, zero_copy))
