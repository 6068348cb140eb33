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
  answers wait (see :mod:`kmeta.net.inbound.flow_control`), and while the daemon's request memory pool
  is full and this connection's partial request grew (see :mod:`kmeta.net.inbound.memory_pool`); a
  connection idle for ``idle_timeout_s`` is closed.
* Memory per connection is bounded: answers are written once about 1 MiB is encoded, and if
  the peer is not reading, the frames still unhandled wait (reading is paused) until it does.
  A peer that reads nothing for ``write_timeout_s`` is aborted (its unsent answers dropped);
  a frame started but not completed within ``request_timeout_s`` closes the connection.
  One watchdog timer per connection serves all three timeouts.
* After a SaslHandshake v0 the authenticator makes the connection hand its frames whole to it
  (raw SASL tokens, no Kafka header) until it is done: see :meth:`receive_raw_frames`.

Its collaborators, each with a narrow interface: :mod:`~kmeta.net.inbound.serve_request` (one frame
through the registry), :mod:`~kmeta.net.inbound.memo_path` (repeated requests answered from the memo),
:mod:`~kmeta.net.inbound.pending_answers` (answers behind a slow one), :mod:`~kmeta.net.inbound.raw_tokens`
(raw SASL tokens), :mod:`~kmeta.net.inbound.read_buffer` (what was read and not handled: the partial
frame, the stash, request memory, when to stop reading, and the timeouts) and
:mod:`~kmeta.net.inbound.answer_writer` (the one write per pass).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, cast

from kmeta.net.dispatch import Answer, Peer
from kmeta.net.hooks import (
    NO_HOOKS,
    ConnectionHooks,
    ConnectionObserver,
    FaultKind,
    RawFrameReceiver,
)
from kmeta.net.inbound.answer_framing import FLUSH_AT, Chunks
from kmeta.net.inbound.answer_writer import AnswerWriter
from kmeta.net.inbound.flow_control import FlowControl
from kmeta.net.inbound.memo_path import ReadOutcome
from kmeta.net.inbound.pending_answers import Held
from kmeta.net.inbound.read_buffer import ReadBuffer
from kmeta.net.inbound.request_pipeline import RequestPipeline
from kmeta.net.inbound.serving import ConnectionLimits as ConnectionLimits  # re-export (old home)
from kmeta.net.inbound.serving import ServingInfo as ServingInfo  # re-export (old home)
from kmeta.net.principal import ANONYMOUS, KafkaPrincipal
from kmeta.protocol.errors import ProtocolError

log = logging.getLogger("kmeta.net.server")
#: how often held answers look whether they may leave (ConnectionHooks.may_answer)
HOLD_POLL_S = 0.05


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
        #: set once by the connection's gate when it authenticates the peer (SASL, mTLS)
        self.principal: KafkaPrincipal = ANONYMOUS
        self.peer: Peer = None
        #: frames in, answers out; its memo path and queue of answers are read on every read
        self._requests = RequestPipeline(info, self, self._async_done)
        self._memo_path = self._requests.memo_path
        self._pending = self._requests.pending
        #: why we closed the connection, when it was for a fault
        self.fault: FaultKind | None = None
        self._on_close = on_close
        self._transport: asyncio.Transport | None = None
        self._flow: FlowControl | None = None  # the read buffer's, once connected
        self._closing = False
        #: the partial frame, the frames stashed while the peer does not read, request memory
        self._read = ReadBuffer(info.limits, info.pool, self._drop, self._gone, self._busy)
        #: the idle, request and write timeouts; also holds the times they are measured from
        self._watchdog = self._read.watchdog
        self._admit = admit
        self.admitted = False
        #: the one write per pass, and the zero-copy seam
        self._writer = AnswerWriter()
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @property
    def requests_handled(self) -> int:
        return self._requests.handled

    # -- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        self._flow = self._read.connected(transport)
        self.peer = transport.get_extra_info("peername")
        self._writer.connected(transport, self.info.zero_copy)
        if self._admit is not None and not self._admit(self):
            self._closing = True  # refused at accept (connection limits); the listener logged it
            transport.abort()
            return
        self.admitted = True
        hooks = self._hooks
        if hooks.observer is not None:
            self._observer = self._writer.observer = self._requests.observer = hooks.observer(self)
        if hooks.gate is not None:
            self._requests.gate = hooks.gate(self)
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
        now = self._watchdog.last_active = time.monotonic()
        memo = True  # look frames up in the memo (False: this read's one frame just missed)
        read = self._read
        if observer is None and not read.splitter.buffered and read.stashed is None and not self._pending:
            # memoised requests answered in place in the bytes read (see MemoPath): one whole
            # frame per read (depth 1), or the whole frames a pipelined read starts with
            answer = self._memo_path.answer_read(data)
            if type(answer) is bytes:
                self._requests.handled += 1
                transport = self._transport
                if transport is not None and not transport.is_closing():
                    transport.write(answer)
                return
            if answer is not None:  # pipelined, a large answer, or a miss
                out: Chunks = []
                found = cast("Answer | ReadOutcome", answer)  # (not bytes: written above)
                answered, memo = self._requests.answer_in_place(data, found, out)
                if answered:
                    self._writer.write(out)
                    if answered == len(data):
                        return
                    read.stash([])  # the peer stopped reading: the rest of the read waits
                    data = data[answered:]
        try:
            frames = read.split(data, now)
        except ProtocolError as exc:
            self._drop(FaultKind.of(exc), str(exc))
            return
        if frames:
            self._process(frames, memo)
            if observer is not None:
                observer.on_answers_ready()
        if read.memory is not None:
            read.account()

    def _process(self, frames: list[bytes], memo: bool = True) -> None:
        out: Chunks = []
        requests = self._requests
        i, n = 0, len(frames)
        while i < n:
            raw = requests.raw  # after SaslHandshake v0: raw SASL tokens, until it is done
            try:
                i = requests.answer(frames, i, out, memo) if raw is None else raw.answer(frames, i, out)
            except Exception as exc:
                self._writer.write(out)
                self._fail(exc, "handler" if raw is None else "SASL token")
                return
            memo = True
            if out and (len(out) > 1 or len(out[0]) >= FLUSH_AT):  # due a write
                self._writer.write(out)
                if i < n and self._read.stash(frames, i):  # the peer stopped reading
                    return
                out = []
        if out:
            transport = self._transport
            if len(out) == 1 and self._observer is None and transport is not None and not transport.is_closing():
                # AnswerWriter.write's common case without the call
                transport.write(out[0])
            else:
                self._writer.write(out)
        if self._pending:
            self._read.queued(len(self._pending))

    def receive_raw_frames(self, receiver: RawFrameReceiver | None, max_size: int = 0) -> None:
        """After SaslHandshake v0: frames are Kafka's raw SASL tokens for ``receiver`` from the
        next one on (``None``: requests again). See :meth:`RequestPipeline.receive_raw`."""
        self._requests.receive_raw(receiver, max_size)
        self._read.splitter.max_frame_size = self.info.limits.max_frame_size if receiver is None else max_size

    def pause_writing(self) -> None:
        self._read.pause_writing()

    def resume_writing(self) -> None:
        stashed = self._read.resume_writing()
        if stashed and not self._closing:
            self._watchdog.last_active = time.monotonic()
            self._process(stashed)
            if self._observer is not None:
                self._observer.on_answers_ready()
        if not self._closing:
            self._read.account()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._read.connection_lost()
        self._pending.cancel()
        if not self.closed.done():
            self.closed.set_result(None)
        if self._observer is not None:
            self._observer.on_close()
        self._on_close(self)

    # -- answers of slow requests -------------------------------------------------------------
    def _async_done(self, _future: asyncio.Future[Any] | None) -> None:
        if self._transport is None or self._transport.is_closing():
            return
        out: Chunks = []
        pending = self._pending
        failure = pending.take_ready(out, self._hooks.may_answer)
        if isinstance(failure, Held):
            # held, in order, until it may leave or the connection is closed
            asyncio.get_running_loop().call_later(HOLD_POLL_S, self._async_done, None)
        elif failure is not None:
            self._writer.write(out)
            self._fail(failure)
            return
        if out:
            self._watchdog.last_active = time.monotonic()
            self._writer.write(out)
        self._read.dequeued(len(pending))
        if self._closing and not pending:
            self._transport.close()

    # -- closing -------------------------------------------------------------------------------
    def _fail(self, exc: BaseException, what: str = "handler") -> None:
        """Close for an exception met serving a request: the peer's fault (ProtocolError), a
        cancelled request, or our bug (logged with its traceback)."""
        if not isinstance(exc, ProtocolError | asyncio.CancelledError):
            log.error("%s failed for %s on %s; closing it", what, self.peer, self.info.listener, exc_info=exc)
        self._drop(*_fault_of(exc))

    def _drop(self, kind: FaultKind, reason: str, abort: bool = False) -> None:
        """Close because of the peer (or an internal failure), without answering further.
        ``abort``: discard unsent answers too (a peer that does not read would otherwise keep
        them, and the socket, alive)."""
        log.debug("closing connection from %s on %s: %s", self.peer, self.info.listener, reason)
        if self.fault is None:
            self.fault = kind
            if self._observer is not None:
                self._observer.on_fault(kind, reason)
        self._closing = True
        self._read.release()
        self._pending.cancel()
        if self._transport is not None:
            if abort:
                self._transport.abort()
            else:
                self._transport.close()

    # -- what the watchdog asks (it closes through _drop) ---------------------------------------
    def _gone(self) -> bool:
        return self._transport is None or self._transport.is_closing()

    def _busy(self) -> bool:
        return bool(self._pending)

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


def _fault_of(exc: BaseException) -> tuple[FaultKind, str]:
    """Why we close for an exception met serving a request (the reason is logged at debug)."""
    if isinstance(exc, ProtocolError):
        return FaultKind.of(exc), str(exc)
    if isinstance(exc, asyncio.CancelledError):
        return FaultKind.REQUEST_CANCELLED, "request cancelled"
    return FaultKind.INTERNAL_ERROR, "internal error"
