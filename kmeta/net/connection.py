"""An outbound Kafka connection: requests with correlation ids, answered in order, with timeouts.

Used by everything that talks to a Kafka-protocol server: the controller's channel to brokers,
brokers to the controller, and the metadata client. Kafka answers requests on one connection
in the order they were sent, so a response whose correlation id is not the oldest one in flight
means the stream is broken and the connection is closed (as aiokafka and Kafka's
NetworkClient do). A request timeout also closes the connection: an in-order stream cannot
skip the late answer.
"""

from __future__ import annotations

import asyncio
import collections
import ssl as ssl_module
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from kmeta.protocol.codec.schema import Message, Record, Request
from kmeta.protocol.errors import ProtocolError
from kmeta.protocol.framing import DEFAULT_MAX_FRAME_SIZE, FrameSplitter
from kmeta.protocol.header import (
    RequestHeader,
    decode_response_header,
    encode_request_header,
    response_header_version,
)
from kmeta.protocol.registry import APIS, Api

#: the response record class a request names (kmeta.protocol.codec.schema.Request)
R = TypeVar("R", bound=Record)


#: an encoded body at least this large is handed to the transport as its pieces, not copied
#: into the frame: at 1M partitions a full UpdateMetadata is ~40 MB, and a copy per broker
#: (plus the transport's copy of a mutable frame it could not write at once) held ~200 MB
#: more in a restarted controller sending it to 3 brokers (issue 17)
_JOIN_BELOW = 64 * 1024


class ConnectionClosedError(ConnectionError):
    """The connection closed (or was closed) before the response arrived."""


@dataclass(slots=True)
class _InFlight:
    correlation_id: int
    response: Message[Any]  # decodes into what ``future`` promises (see ``send``)
    version: int
    header_version: int
    future: asyncio.Future[Any]


class KafkaConnection(asyncio.Protocol):
    """One TCP connection to a Kafka-protocol server. Create with :meth:`open`."""

    def __init__(self, client_id: str, max_frame_size: int) -> None:
        self.client_id = client_id
        self._splitter = FrameSplitter(max_frame_size)
        self._transport: asyncio.Transport | None = None
        self._in_flight: collections.deque[_InFlight] = collections.deque()
        self._next_correlation_id = 0
        self._closed = asyncio.get_running_loop().create_future()
        self.close_reason: BaseException | None = None

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        client_id: str = "kmeta",
        timeout_s: float = 10.0,
        ssl: ssl_module.SSLContext | None = None,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> KafkaConnection:
        loop = asyncio.get_running_loop()
        _, protocol = await asyncio.wait_for(
            loop.create_connection(
                lambda: cls(client_id, max_frame_size),
                host,
                port,
                ssl=ssl,
                server_hostname=host if ssl is not None else None,
            ),
            timeout_s,
        )
        return protocol

    # -- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport is not an asyncio.Transport subclass, but has its interface
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            for frame in self._splitter.feed(data):
                self._complete(frame)
        except (ProtocolError, ValueError) as exc:
            self._fail(exc)

    def _complete(self, frame: bytes) -> None:
        if not self._in_flight:
            raise ProtocolError("response received with no request in flight")
        head = self._in_flight.popleft()
        correlation_id, pos = decode_response_header(frame, head.header_version)
        if correlation_id != head.correlation_id:
            raise ProtocolError(
                f"correlation id {correlation_id} does not match {head.correlation_id}"
            )
        try:
            value = head.response.decode(frame, head.version, pos)
        except ProtocolError as exc:
            if not head.future.done():
                head.future.set_exception(exc)
            raise
        if not head.future.done():
            head.future.set_result(value)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or ConnectionClosedError("connection closed by peer"))

    def _fail(self, exc: BaseException) -> None:
        if self.close_reason is None:
            self.close_reason = exc
        while self._in_flight:
            item = self._in_flight.popleft()
            if not item.future.done():
                item.future.set_exception(ConnectionClosedError(str(exc) or type(exc).__name__))
        if self._transport is not None:
            self._transport.close()
        if not self._closed.done():
            self._closed.set_result(None)

    # -- public --------------------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self.close_reason is None and self._transport is not None

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def peer(self) -> tuple[str, int] | None:
        return self._transport.get_extra_info("peername") if self._transport else None

    def send(
        self,
        request: Request[R],
        *,
        header: RequestHeader | None = None,
        body: bytes | tuple[bytes, ...] | None = None,
    ) -> asyncio.Future[R]:
        """Write ``request`` (a message instance carrying its version); the future gets the response.

        ``body``: ``request`` already encoded (the controller encodes one big request once and
        sends it to several brokers); it is written as is instead of encoding ``request``. A
        tuple of pieces is written one after the other (each broker's own head, then the
        part every broker shares: one object, not a copy per broker while it waits).
        """
        if not self.is_open:
            raise ConnectionClosedError(f"connection is closed: {self.close_reason}")
        assert self._transport is not None
        api = api_of_instance(request)
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        head = header or RequestHeader(api.key, request.version, correlation_id, self.client_id)
        out = bytearray(4)
        encode_request_header(head, out)
        pieces: tuple[bytes, ...] = ()
        if body is None:
            api.request.encode_into(request, out)
        else:
            pieces = body if isinstance(body, tuple) else (body,)
            size = sum(map(len, pieces))
            if size < _JOIN_BELOW:
                for piece in pieces:
                    out += piece
                pieces = ()
            else:  # written as they are: no copy of a full update per broker (see _JOIN_BELOW)
                out[0:4] = (len(out) - 4 + size).to_bytes(4, "big")
        if not pieces:
            out[0:4] = (len(out) - 4).to_bytes(4, "big")
        # the registry's response message decodes into ``request.response_class()``
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._in_flight.append(
            _InFlight(
                head.correlation_id,
                api.response,
                request.version,
                response_header_version(api.key, request.version),
                future,
            )
        )
        if pieces:
            self._transport.writelines((bytes(out), *pieces))
        else:
            self._transport.write(out)
        return future

    async def request(self, request: Request[R], timeout_s: float = 30.0) -> R:
        """Send and await the response; a timeout closes the connection (the stream is in order)."""
        future = self.send(request)
        try:
            async with asyncio.timeout(timeout_s):
                return await asyncio.shield(future)
        except BaseException as exc:
            if isinstance(exc, TimeoutError):
                self._fail(TimeoutError(f"request timed out after {timeout_s:.3f} s"))
            # the caller gave up on the answer (timed out, cancelled, Ctrl-C): its failure is
            # read here, so asyncio does not log "Future exception was never retrieved"
            future.add_done_callback(_retrieve)
            raise

    def close(self) -> None:
        self._fail(ConnectionClosedError("closed locally"))

    async def wait_closed(self) -> None:
        await self._closed


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


_API_BY_REQUEST_CLASS: dict[type, Api[Any, Any]] = {api.request.cls: api for api in APIS.values()}


def api_of_instance(request: Record) -> Api[Any, Any]:
    """The registry entry for a request instance (found through its namedtuple class)."""
    try:
        return _API_BY_REQUEST_CLASS[type(request)]
    except KeyError:
        raise TypeError(f"{type(request).__name__} is not a request message") from None
