"""One accepted connection of a Kafka-protocol server: framing, dispatch, in-order answers.

* Every complete frame of one ``data_received`` is handled, and the answers that are ready go
  out with ONE ``transport.write`` (one write per frame costs several times the CPU when
  clients pipeline).
* A handler may be synchronous (answered in the same pass) or return an awaitable (answered
  when it completes); answers always leave in request order, so a fast answer queued behind a
  slow one waits for it.
* The peer's fault closes this connection and nothing else, logged at debug with the peer and
  the reason: a frame over ``max_frame_size`` (refused from its 4-byte prefix, before the body
  is buffered), an unknown api key, a version the registry does not serve, an unparsable header
  or body. A handler that raises is our bug: logged with its traceback, and the connection is
  closed. No exception leaves this class towards the listener. Every such close has a
  :class:`~kmeta.net.hooks.FaultKind`, reported to the connection's observer.
* Metrics and authentication attach through :class:`~kmeta.net.hooks.ConnectionHooks` (an
  observer told of reads, requests, writes and faults; a gate that admits API keys), never by
  subclassing.
* Reading pauses while the peer does not read our answers or while ``max_queued_requests``
  answers wait (see :mod:`kmeta.net.flow_control`), and while the daemon's request memory pool
  is full and this connection's partial request grew (see :mod:`kmeta.net.memory_pool`); a
  connection idle for ``idle_timeout_s`` is closed.
* Memory per connection is bounded: answers are written once about 1 MiB is encoded, and if
  the peer is not reading, the frames still unhandled wait (reading is paused) until it does.
  A peer that reads nothing for ``write_timeout_s`` is aborted (its unsent answers dropped);
  a frame started but not completed within ``request_timeout_s`` closes the connection.
  One watchdog timer per connection serves all three timeouts.
* After a SaslHandshake v0 the authenticator makes the connection hand its frames whole to it
  (raw SASL tokens, no Kafka header) until it is done: see :meth:`receive_raw_frames`.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import time
from collections.abc import Callable
from typing import Any, cast

from kmeta.net.answer_framing import FLUSH_AT, Chunks, append_answer, encode_answer
from kmeta.net.answer_writer import AnswerWriter
from kmeta.net.dispatch import (
    AnyHandler,
    EncodedPieces,
    Peer,
    Reply,
    RequestContext,
)
from kmeta.net.flow_control import FlowControl
from kmeta.net.hooks import (
    NO_HOOKS,
    ConnectionHooks,
    ConnectionObserver,
    FaultKind,
    NotAdmittedError,
    RawFrameReceiver,
    RequestGate,
)
from kmeta.net.memo_path import MemoPath, Missed
from kmeta.net.memory_pool import RequestMemoryPool
from kmeta.net.security.principal import ANONYMOUS, KafkaPrincipal
from kmeta.net.serving import ConnectionLimits as ConnectionLimits  # re-export (old home)
from kmeta.net.serving import ServingInfo as ServingInfo  # re-export (old home)
from kmeta.net.watchdog import Watchdog
from kmeta.protocol.errors import (
    ErrorCode,
    FrameTooLargeError,
    ProtocolError,
    UnsupportedVersionError,
)
from kmeta.protocol.framing import FrameSplitter
from kmeta.protocol.header import RequestHeader, decode_request_header
from kmeta.protocol.schema import Record

log = logging.getLogger("kmeta.net.server")


class _AsyncSlot:
    __slots__ = ("future", "handler", "header")

    def __init__(self, future: asyncio.Future[Any], header: RequestHeader, handler: AnyHandler[Any]) -> None:
        self.future = future
        self.header = header
        self.handler = handler


MEMORY = "memory"  # the flow-control hold of a full request memory pool


class ServerConnection(asyncio.Protocol):
    """One client connection. It hands ``info.state`` to the handlers of ``info.registry``
    without reading it, so it keeps ``info`` with the state's type erased (``Any``): the
    listener that makes it is typed by the daemon's state."""

    def __init__(
        self,
        info: ServingInfo[Any],
        on_close: Callable[[ServerConnection], None],
        admit: Callable[[ServerConnection], bool] | None = None,
        hooks: ConnectionHooks = NO_HOOKS,
    ) -> None:
        self.info = info
        self._hooks = hooks
        #: made from ``hooks`` once the connection is admitted (see connection_made)
        self._observer: ConnectionObserver | None = None
        self._gate: RequestGate | None = None
        #: set once by the connection's gate when it authenticates the peer (SASL, mTLS)
        self.principal: KafkaPrincipal = ANONYMOUS
        #: while set, frames are raw SASL tokens for it (after SaslHandshake v0), not requests
        self._raw_receiver: RawFrameReceiver | None = None
        self._raw_max = 0
        #: why we closed the connection, when it was for a fault
        self.fault: FaultKind | None = None
        self._on_close = on_close
        self._splitter = FrameSplitter(info.limits.max_frame_size)
        self._transport: asyncio.Transport | None = None
        self._flow: FlowControl | None = None
        self._pending: collections.deque[Chunks | _AsyncSlot] = collections.deque()
        self._closing = False
        #: the idle, request and write timeouts; also holds the times they are measured from
        self._watchdog = Watchdog(info.limits, self._expire, self._gone, self._busy, self._not_reading)
        self._stashed: list[bytes] | None = None  # frames read but not handled (write paused)
        self._held = 0  # request bytes (partial frame + stashed frames) counted in info.pool
        self._admit = admit
        self.admitted = False
        #: the last memoised request's header, and its memo
        self._memo_path = MemoPath(info.state, info.listener)
        self.peer: Peer = None
        #: the one write per pass, and the zero-copy seam
        self._writer = AnswerWriter()
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.requests_handled = 0

    # -- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        self._flow = FlowControl(transport)
        self.peer = transport.get_extra_info("peername")
        self._writer.connected(transport, self.info.zero_copy)
        if self._admit is not None and not self._admit(self):
            self._closing = True  # refused at accept (connection limits); the listener logged it
            transport.abort()
            return
        self.admitted = True
        hooks = self._hooks
        if hooks.observer is not None:
            self._observer = self._writer.observer = hooks.observer(self)
        if hooks.gate is not None:
            self._gate = hooks.gate(self)
        watchdog = self._watchdog
        watchdog.arm(watchdog.last_active + self.info.limits.idle_timeout_s)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """The transport's extra info (``peercert``, ``ssl_object``, ...): for hooks."""
        if self._transport is None:
            return default
        return self._transport.get_extra_info(name, default)

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        observer = self._observer
        if observer is not None:
            observer.on_read(len(data))
        watchdog = self._watchdog
        now = watchdog.last_active = time.monotonic()
        memo = True  # look frames up in the memo (False: this read's one frame just missed)
        if observer is None and not self._splitter.buffered and self._stashed is None and not self._pending:
            # one whole memoised request per read (depth 1): answered in place, see MemoPath
            answer = self._memo_path.answer_read(data)
            if type(answer) is bytes:
                self.requests_handled += 1
                transport = self._transport
                if transport is not None and not transport.is_closing():
                    transport.write(answer)
                return
            if isinstance(answer, Missed):
                memo = False
            elif answer is not None:  # a large answer: its pieces are framed, not copied
                self.requests_handled += 1
                out: Chunks = []
                append_answer(data[8:12], self._memo_path.response_header_version, answer, out)
                self._writer.write(out)
                return
        try:
            frames = self._splitter.feed(data)
        except ProtocolError as exc:
            self._drop(FaultKind.of(exc), str(exc))
            return
        if self._splitter.buffered:
            if watchdog.partial_since is None or frames:  # a request started: request_timeout_s
                watchdog.partial_since = now
                watchdog.arm(now + self.info.limits.request_timeout_s)
        else:
            watchdog.partial_since = None
        if self._stashed is not None:
            self._stashed += frames
        elif frames:
            self._process(frames, memo)
            if observer is not None:
                observer.on_answers_ready()
        pool = self.info.pool
        if pool is not None and (self._held or self._splitter.buffered or self._stashed):
            self._account_memory(pool)

    def _process(self, frames: list[bytes], memo: bool = True) -> None:
        if self._raw_receiver is not None:  # the one test a read pays for SaslHandshake v0
            self._process_raw(frames, 0)
            return
        out: Chunks = []
        observer = self._observer
        # The memo fast path: a frame with the same api key, version, client id and header tags
        # as the last request whose handler has a memo, while no answer waits (in-order
        # answers), has a known header parse; a memo hit then needs no header object, no
        # context, no handle(). Both only change when a frame takes the full path.
        memo_path = self._memo_path
        known = memo and not self._pending and memo_path.known
        i, n = 0, len(frames)
        while i < n:
            if known:
                hits = memo_path.answer_frames(frames, i, out) - i
                if hits:
                    self.requests_handled += hits
                    if observer is not None:
                        key, version = frames[i][0] << 8 | frames[i][1], memo_path.version
                        for _ in range(hits):
                            observer.on_request(key, version, None)
                    i += hits
                    if len(out) > 1 or len(out[0]) >= FLUSH_AT:
                        if self._flush(out, frames, i - 1):
                            return
                        out = []
                        continue  # frame i is not looked up yet
                    if i == n:
                        break
                # frame i is not a memo hit: the full path
            frame = frames[i]
            i += 1
            try:
                answer = self._handle_frame(frame, out)
            except ProtocolError as exc:
                self._writer.write(out)
                self._drop(FaultKind.of(exc), str(exc))
                return
            except Exception:
                log.exception("handler failed for %s on %s; closing it", self.peer, self.info.listener)
                self._writer.write(out)
                self._drop(FaultKind.INTERNAL_ERROR, "internal error")
                return
            if observer is not None:
                # the registry served the frame: its header starts with api key and version
                observer.on_request(frame[0] << 8 | frame[1], frame[2] << 8 | frame[3], answer)
            if self._raw_receiver is not None:
                # a SaslHandshake v0 was accepted: the frames after it are raw SASL tokens
                self._writer.write(out)
                self._process_raw(frames, i)
                return
            # the handler may have learned another header or left an answer waiting
            known = not self._pending and memo_path.known
            if out and (len(out) > 1 or len(out[0]) >= FLUSH_AT):
                if self._flush(out, frames, i - 1):
                    return
                out = []
        if out:
            transport = self._transport
            if len(out) == 1 and observer is None and transport is not None and not transport.is_closing():
                # AnswerWriter.write's common case without the call (a call costs about a tenth of a memo
                # hit at one request per read)
                transport.write(out[0])
            else:
                self._writer.write(out)
        if self._pending and len(self._pending) > self.info.limits.max_queued_requests:
            assert self._flow is not None
            self._flow.hold_reading("queue")

    def receive_raw_frames(self, receiver: RawFrameReceiver | None, max_size: int = 0) -> None:
        """From the next frame on, hand each frame whole to ``receiver`` (no Kafka header is
        parsed) and send what it returns size-prefixed without a response header: Kafka's
        SASL tokens after SaslHandshake v0. ``None``: frames are Kafka requests again.

        A frame over ``max_size`` closes the connection; the splitter refuses it from its
        prefix, before buffering it (frames already split in the same read are checked whole).
        The receiver raises ProtocolError to close the connection (v0 has no error to send).
        """
        self._raw_receiver = receiver
        self._raw_max = max_size
        self._memo_path.forget()
        self._splitter.max_frame_size = (
            self.info.limits.max_frame_size if receiver is None else max_size
        )

    def _process_raw(self, frames: list[bytes], start: int) -> None:
        out: Chunks = []
        for i in range(start, len(frames)):
            receiver = self._raw_receiver
            if receiver is None:  # the authenticator is done: the rest are Kafka requests
                self._writer.write(out)
                self._process(frames[i:])
                return
            token = frames[i]
            try:
                if len(token) > self._raw_max:
                    raise FrameTooLargeError(f"SASL token of {len(token)} bytes over {self._raw_max}")
                challenge = receiver(token)
            except ProtocolError as exc:
                self._writer.write(out)
                self._drop(FaultKind.of(exc), str(exc))
                return
            except Exception:
                log.exception("SASL token failed for %s on %s; closing it", self.peer, self.info.listener)
                self._writer.write(out)
                self._drop(FaultKind.INTERNAL_ERROR, "internal error")
                return
            out.append(len(challenge).to_bytes(4, "big") + challenge)
        self._writer.write(out)

    def _flush(self, out: Chunks, frames: list[bytes], i: int) -> bool:
        """Bound what one read can make us buffer: write ``out``, and if the peer is not
        reading, keep the frames after ``i`` until it does (True: stop here)."""
        self._writer.write(out)
        if self._flow is not None and self._flow.write_paused and i + 1 < len(frames):
            self._stashed = frames[i + 1 :]
            return True
        return False

    def pause_writing(self) -> None:
        if self._flow is not None:
            self._flow.pause_writing()
            now = time.monotonic()
            self._watchdog.stalled_since = now
            self._watchdog.arm(now + self.info.limits.write_timeout_s)

    def resume_writing(self) -> None:
        self._watchdog.stalled_since = None
        if self._flow is not None:
            self._flow.resume_writing()
        stashed, self._stashed = self._stashed, None
        if stashed and not self._closing:
            self._watchdog.last_active = time.monotonic()
            self._process(stashed)
            if self._observer is not None:
                self._observer.on_answers_ready()
        if self.info.pool is not None and not self._closing:
            self._account_memory(self.info.pool)

    def _account_memory(self, pool: RequestMemoryPool) -> None:
        """Tell the pool what this connection holds now; stop reading when it says so."""
        held = self._splitter.buffered
        if self._stashed:
            held += sum(map(len, self._stashed))
        if held == self._held:
            return
        before, self._held = self._held, held
        if pool.account(before, held, self._resume_memory) and self._flow is not None:
            self._flow.hold_reading(MEMORY)

    def _resume_memory(self) -> None:
        if self._flow is not None:
            self._flow.release_reading(MEMORY)

    def _release_memory(self) -> None:
        """Give back everything held (closing): the pool may wake other connections."""
        pool = self.info.pool
        if pool is not None:
            pool.forget(self._resume_memory)
            if self._held:
                before, self._held = self._held, 0
                self._stashed = None
                self._splitter = FrameSplitter(self.info.limits.max_frame_size)
                pool.account(before, 0, self._resume_memory)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._release_memory()
        if self._flow is not None:
            self._flow.connection_lost()
        self._watchdog.cancel()
        for slot in self._pending:
            if isinstance(slot, _AsyncSlot):
                slot.future.cancel()
        self._pending.clear()
        if not self.closed.done():
            self.closed.set_result(None)
        if self._observer is not None:
            self._observer.on_close()
        self._on_close(self)

    # -- requests ------------------------------------------------------------------------------
    def _handle_frame(self, frame: bytes, out: Chunks) -> asyncio.Future[Any] | None:
        """Serve one frame: its answer goes to ``out`` (or the queue behind a slow one); an
        asynchronous answer's future is returned (None: answered now)."""
        info = self.info
        header, pos = decode_request_header(frame)
        handler = info.registry.get(header.api_key)
        if handler is None:
            raise UnsupportedVersionError(f"api key {header.api_key} has no handler")
        gate = self._gate
        if gate is not None and not gate.admits(header.api_key):
            raise NotAdmittedError(f"api key {header.api_key} before authentication")
        ctx = RequestContext(
            header, info.listener, info.is_control, self.peer, info.state, info.registry, gate,
            self.principal,
        )  # fmt: skip
        self.requests_handled += 1
        version = header.api_version
        if not handler.min_version <= version <= handler.max_version:
            if handler.unsupported_version is None:
                raise UnsupportedVersionError(f"api key {header.api_key} v{version} is not served")
            self._answer(header, handler, handler.unsupported_version(ctx), out)
            return None
        if handler.serves(info.is_control):
            decode = handler.decode or handler.api.request.decode
            result = handler.handle(ctx, decode(frame, version, pos))
            memo = handler.memo
            if memo is not None:
                # Only the header-known path above reads the memo: this one decodes anyway,
                # and fills it for the next request.
                header_version = handler.response_header_versions[version]
                self._memo_path.learn(frame, pos, memo, version, header_version)
                if type(result) is EncodedPieces or type(result) is bytes:
                    memo(info.state, version, info.listener).offer(frame[pos:], result, header_version)
        elif handler.refuse is not None:
            request = handler.api.request.decode(frame, version, pos)
            result = handler.refuse(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        else:
            raise UnsupportedVersionError(
                f"api key {header.api_key} is not served on listener {info.listener}"
            )
        # records are (named) tuples: only other objects can be awaitables
        if not isinstance(result, tuple | bytes | bytearray) and inspect.isawaitable(result):
            future = asyncio.ensure_future(result)
            self._pending.append(_AsyncSlot(future, header, handler))
            future.add_done_callback(self._async_done)
            return future
        self._answer(header, handler, result, out)
        return None

    def _answer(self, header: RequestHeader, handler: AnyHandler[Any], result: Reply[Record], out: Chunks) -> None:
        if not self._pending:
            encode_answer(header, handler, result, out)
            return
        # Behind a slow answer: queue this one (kept in order, sent when the slow one is).
        chunks: Chunks = []
        encode_answer(header, handler, result, chunks)
        self._pending.append(chunks)

    def _async_done(self, _future: asyncio.Future[Any]) -> None:
        if self._transport is None or self._transport.is_closing():
            return
        out: Chunks = []
        pending = self._pending
        while pending:
            head = pending[0]
            if isinstance(head, list):
                out += head
            elif not head.future.done():
                break
            elif head.future.cancelled():
                self._writer.write(out)
                self._drop(FaultKind.REQUEST_CANCELLED, "request cancelled")
                return
            else:
                exc = head.future.exception()
                if exc is not None:
                    self._writer.write(out)
                    if isinstance(exc, ProtocolError):
                        self._drop(FaultKind.of(exc), str(exc))
                    else:
                        log.error(
                            "handler failed for %s on %s; closing it",
                            self.peer,
                            self.info.listener,
                            exc_info=exc,
                        )
                        self._drop(FaultKind.INTERNAL_ERROR, "internal error")
                    return
                encode_answer(head.header, head.handler, head.future.result(), out)
            pending.popleft()
        if out:
            self._watchdog.last_active = time.monotonic()
            self._writer.write(out)
        assert self._flow is not None
        if len(pending) <= self.info.limits.max_queued_requests // 2:
            self._flow.release_reading("queue")
        if self._closing and not pending:
            self._transport.close()

    # -- closing -------------------------------------------------------------------------------
    def _drop(self, kind: FaultKind, reason: str, *, abort: bool = False) -> None:
        """Close because of the peer (or an internal failure), without answering further.

        ``abort``: discard unsent answers too (a peer that does not read would otherwise keep
        them, and the socket, alive).
        """
        log.debug("closing connection from %s on %s: %s", self.peer, self.info.listener, reason)
        if self.fault is None:
            self.fault = kind
            if self._observer is not None:
                self._observer.on_fault(kind, reason)
        self._closing = True
        self._release_memory()
        self._stashed = None
        for slot in self._pending:
            if isinstance(slot, _AsyncSlot):
                slot.future.cancel()
        self._pending.clear()
        if self._transport is not None:
            if abort:
                self._transport.abort()
            else:
                self._transport.close()

    # -- what the watchdog asks and tells -----------------------------------------------------
    def _expire(self, kind: FaultKind, reason: str, abort: bool) -> None:
        self._drop(kind, reason, abort=abort)

    def _gone(self) -> bool:
        return self._transport is None or self._transport.is_closing()

    def _busy(self) -> bool:
        return bool(self._pending)

    def _not_reading(self) -> bool:
        return self._flow is not None and self._flow.reading_held_except(MEMORY)

    def close_gracefully(self) -> None:
        """Stop reading; close once the requests already read are answered."""
        if self._transport is None or self._transport.is_closing():
            return
        self._closing = True
        assert self._flow is not None
        self._flow.hold_reading("shutdown")
        if not self._pending:
            self._transport.close()

    def abort(self) -> None:
        """Close now, dropping whatever is still unanswered (shutdown stragglers)."""
        if self._transport is not None:
            self._transport.abort()

    @property
    def in_flight(self) -> int:
        return len(self._pending)
