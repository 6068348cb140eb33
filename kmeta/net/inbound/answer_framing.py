"""Framing answers into the chunks one pass of a connection writes.

Split from :mod:`kmeta.net.inbound.server_connection` so the byte layout of an answer (size, response
header, body) lives apart from the connection's reading, ordering and closing. A connection
gathers every answer of one read into a ``Chunks`` list and writes it once: small answers share
the last ``bytearray``; a large encoded piece (a cached Metadata block, possibly a
:class:`~kmeta.net.inbound.zerocopy.SpliceableBytes`) stays a chunk of its own so it is never copied on
its way to the socket.
"""

from __future__ import annotations

from typing import Any

from kmeta.net.dispatch import Answer, AnyHandler, EncodedPieces, NoResponse, Reply
from kmeta.protocol.codec.schema import Record
from kmeta.protocol.header import (
    FramedResponse,
    RequestHeader,
    encode_response_header,
    framed_response,
    response_header_rest,
    response_header_version,
)

_BIG = 32 * 1024  # pieces at least this large are handed to the transport, not copied
#: a pass writes what it encoded once it holds this much (or more than one chunk), so what
#: one read makes us buffer is bounded
FLUSH_AT = 1024 * 1024
Chunks = list[bytes | bytearray]


def encode_answer(header: RequestHeader, handler: AnyHandler[Any], result: Reply[Record], out: Chunks) -> None:
    """Append the framed response for ``result`` to the chunks ``out``.

    ``result``: a record (encoded at its own version, straight into the last chunk), or an
    encoded body (``bytes``, ``bytearray`` or EncodedPieces at the request's version, framed
    by :func:`append_answer`); nothing for ``NO_RESPONSE``.
    """
    if isinstance(result, NoResponse):
        return
    if isinstance(result, bytes | bytearray | EncodedPieces):
        correlation = header.correlation_id.to_bytes(4, "big", signed=True)
        append_answer(correlation, handler.response_header_versions[header.api_version], result, out)
        return
    buf = out[-1] if out and type(out[-1]) is bytearray else None
    if buf is None:
        buf = bytearray()
        out.append(buf)
    start = len(buf)
    buf += b"\0\0\0\0"
    encode_response_header(
        header.correlation_id, response_header_version(header.api_key, result.version), buf
    )
    handler.api.response.encode_into(result, buf)
    buf[start : start + 4] = (len(buf) - start - 4).to_bytes(4, "big")


def append_answer(
    correlation: bytes, header_version: int, body: Answer | bytes | bytearray, out: Chunks
) -> None:
    """Frame an encoded body: size, response header, body. The one chunking path.

    ``correlation``: the 4 correlation id bytes (a memo hit copies them from the request).
    ``body``: a FramedResponse (a memoised answer, framed once), bytes, or EncodedPieces.
    Small answers go into the last chunk (one buffer for many pipelined answers); a large
    piece becomes a chunk of its own, so cached blocks are never copied on their way to the
    socket.
    """
    last = out[-1] if out else None
    if type(last) is not bytearray:
        last = bytearray()
        out.append(last)
    if not isinstance(body, EncodedPieces):
        framed = body if isinstance(body, FramedResponse) else framed_response(header_version, body)
        last += framed.size
        last += correlation
        last += framed.rest
        return
    rest = response_header_rest(header_version)
    last += (4 + len(rest) + sum(map(len, body))).to_bytes(4, "big")
    last += correlation
    last += rest
    for piece in body:
        if len(piece) >= _BIG:
            out.append(piece)
        elif type(out[-1]) is bytearray:
            out[-1] += piece
        else:
            out.append(bytearray(piece))
