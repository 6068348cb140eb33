"""A connection's requests, frames in and answers out, in request order.

Split from :mod:`kmeta.net.inbound.server_connection`, which keeps the socket's side (reading, the
one write per pass, flow control, timeouts, closing). This side knows nothing of the
transport: :meth:`RequestPipeline.answer` turns the frames of one read into the chunks to
write and says how far it got; the connection writes them and decides whether to go on.

* Frames that repeat the header of the last memoised request are answered from the memo
  (:class:`~kmeta.net.inbound.memo_path.MemoPath`), the others through the registry
  (:mod:`~kmeta.net.inbound.serve_request`). A read the connection checked in place with
  :meth:`MemoPath.answer_read` and could not answer with one write of its own (pipelined
  frames, a large answer, a miss) is finished by :meth:`RequestPipeline.answer_in_place`.
* A handler may return an awaitable: the answer waits in
  :class:`~kmeta.net.inbound.pending_answers.PendingAnswers`, and every answer after it joins the
  queue until it is done (the connection is told through ``on_slow_done``).
* After a SaslHandshake v0 the frames are raw SASL tokens (``raw``): the pipeline stops at
  the first of them and the connection hands them to the authenticator.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, Protocol

from kmeta.net.dispatch import Answer, Peer, RequestContext
from kmeta.net.hooks import ConnectionObserver, RawFrameReceiver, RequestGate
from kmeta.net.inbound.answer_framing import FLUSH_AT, Chunks, append_answer, encode_answer
from kmeta.net.inbound.memo_path import MemoPath, ReadOutcome
from kmeta.net.inbound.pending_answers import PendingAnswers
from kmeta.net.inbound.raw_tokens import RawTokens
from kmeta.net.inbound.serve_request import route, serve
from kmeta.net.inbound.serving import ServingInfo
from kmeta.net.principal import KafkaPrincipal


class Requester(Protocol):
    """Who sends the requests, as each request's context reads it at the time (the gate may
    authenticate the peer between two requests)."""

    @property
    def peer(self) -> Peer: ...

    @property
    def principal(self) -> KafkaPrincipal: ...


class RequestPipeline:
    __slots__ = ("_info", "_on_slow_done", "_requester", "gate", "handled", "memo_path", "observer", "pending", "raw")

    def __init__(
        self,
        info: ServingInfo[Any],
        requester: Requester,
        on_slow_done: Callable[[asyncio.Future[Any]], None],
    ) -> None:
        self._info = info
        self._requester = requester
        self._on_slow_done = on_slow_done
        #: the connection's hooks, once it is admitted
        self.gate: RequestGate | None = None
        self.observer: ConnectionObserver | None = None
        #: the last memoised request's header, and its memo
        self.memo_path = MemoPath(info.state, info.listener)
        self.pending = PendingAnswers()
        #: while set, frames are raw SASL tokens (after SaslHandshake v0), not requests
        self.raw: RawTokens | None = None
        self.handled = 0  # requests served (memo hits and the full path), for tests and tools

    def answer(self, frames: list[bytes], start: int, out: Chunks, memo: bool = True) -> int:
        """Answer ``frames[start:]`` into ``out``, in order; the index of the first frame not
        handled. It stops early only when ``out`` is due a write (more than one chunk, or
        FLUSH_AT bytes) or the frames turned to raw SASL tokens. ``memo`` False: the first
        frame just missed the memo (it is not looked up again). A frame that must close the
        connection raises; the answers before it are in ``out``."""
        observer = self.observer
        memo_path = self.memo_path
        known = memo and not self.pending and memo_path.known
        i, n = start, len(frames)
        while i < n:
            if known:
                hits = memo_path.answer_frames(frames, i, out) - i
                if hits:
                    self.handled += hits
                    if observer is not None:
                        key, version = frames[i][0] << 8 | frames[i][1], memo_path.version
                        for _ in range(hits):
                            observer.on_request(key, version, None)
                    i += hits
                    if len(out) > 1 or len(out[0]) >= FLUSH_AT or i == n:
                        return i  # due a write, or done (frame i is not looked up yet)
                # frame i is not a memo hit: the full path
            frame = frames[i]
            i += 1
            answer = self._serve(frame, out)
            if observer is not None:
                # the registry served the frame: its header starts with api key and version
                observer.on_request(frame[0] << 8 | frame[1], frame[2] << 8 | frame[3], answer)
            if self.raw is not None:
                return i  # a SaslHandshake v0 was accepted: the frames after it are raw tokens
            # the handler may have learned another header or left an answer waiting
            known = not self.pending and memo_path.known
            if out and (len(out) > 1 or len(out[0]) >= FLUSH_AT):
                return i
        return n

    def answer_in_place(
        self, data: bytes, read: Answer | ReadOutcome, out: Chunks
    ) -> tuple[int, bool]:
        """Answer from the memo, in place in ``data``, a read :meth:`MemoPath.answer_read`
        found no small answer for (``read``, what it said): SEVERAL, the whole frames the read
        starts with; a large answer, its pieces (framed, not copied); MISSED, nothing. The
        answers go to ``out``; returns how many bytes of ``data`` they answer, and whether the
        frame after them may be looked up in the memo (False: it just missed)."""
        if read is ReadOutcome.SEVERAL:  # pipelined: the whole frames it starts with
            answered, hits, missed = self.memo_path.answer_data(data, out)
            self.handled += hits
            return answered, not missed
        if read is ReadOutcome.MISSED:
            return 0, False
        self.handled += 1
        append_answer(data[8:12], self.memo_path.response_header_version, read, out)
        return len(data), True

    def _serve(self, frame: bytes, out: Chunks) -> asyncio.Future[Any] | None:
        """Serve one frame: its answer goes to ``out`` (or the queue behind a slow one); an
        asynchronous answer's future is returned (None: answered now)."""
        info, gate = self._info, self.gate
        header, pos, handler = route(info.registry, frame, gate)
        requester = self._requester
        ctx = RequestContext(
            header, info.listener, info.is_control, requester.peer, info.state, info.registry, gate,
            requester.principal,
        )  # fmt: skip
        self.handled += 1
        result = serve(ctx, handler, frame, pos, self.memo_path)
        # records are (named) tuples: only other objects can be awaitables
        if not isinstance(result, tuple | bytes | bytearray) and inspect.isawaitable(result):
            future = asyncio.ensure_future(result)
            self.pending.add_slow(future, header, handler)
            future.add_done_callback(self._on_slow_done)
            return future
        if self.pending:  # behind a slow answer: it waits for its turn
            self.pending.add_answer(header, handler, result)
        else:
            encode_answer(header, handler, result, out)
        return None

    def receive_raw(self, receiver: RawFrameReceiver | None, max_size: int) -> None:
        """From the next frame on, hand each frame whole to ``receiver`` (no Kafka header is
        parsed) and send what it returns size-prefixed without a response header: Kafka's SASL
        tokens after SaslHandshake v0. ``None``: frames are Kafka requests again.

        The connection's splitter refuses a frame over ``max_size`` from its
        prefix, before buffering it; frames already split in the same read are checked whole
        by :class:`RawTokens`. The receiver raises ProtocolError to close the connection (v0
        has no error to send)."""
        if self.raw is not None:
            self.raw.receiver = None  # a token being answered: the frames after it are requests
        self.raw = None if receiver is None else RawTokens(receiver, max_size)
        self.memo_path.forget()
