"""The memo fast path: a request whose header bytes repeat the last one is answered from the
handler's memo without a header object or context, byte for byte as the full path would."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kmeta.net.dispatch import Answer, AnswerMemo, HandlerRegistry, RequestContext
from kmeta.net.inbound.server_connection import ConnectionLimits, ServerConnection, ServingInfo
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.framing import FrameSplitter
from kmeta.protocol.header import RequestHeader, encode_request_header
from kmeta.protocol.messages import metadata as md
from tests.server.helpers import (
    PLAINTEXT,
    ConnectionPair,
    MemoryTransport,
    broker_state,
    live_broker,
    partition,
    update_metadata,
)


def _frame(request: Any, correlation_id: int, client_id: str | None = "c") -> bytes:
    out = bytearray()
    encode_request_header(RequestHeader(ApiKey.METADATA, request.version, correlation_id, client_id), out)
    md.REQUEST.encode_into(request, out)
    return len(out).to_bytes(4, "big") + bytes(out)


class _CountingAnswers(dict[bytes, Answer]):
    """A memo's answers that record every lookup."""

    def __init__(self, calls: list[bytes]) -> None:
        super().__init__()
        self.calls = calls

    def get(self, body: bytes, default: Any = None) -> Any:
        self.calls.append(body)
        return super().get(body, default)


class _Counting:
    """A Metadata handler with a memo; counts which path answered. (It answers with the
    client id, which a memoised API must not: that shows which path answered.)"""

    def __init__(self) -> None:
        self.handled = 0
        self.memo_calls: list[bytes] = []
        snapshot = object()
        self._memo = AnswerMemo(SimpleNamespace(snapshot=snapshot), snapshot)
        self._memo.answers = _CountingAnswers(self.memo_calls)

    def handle(self, ctx: RequestContext, request: Any) -> Any:
        self.handled += 1
        response = md.MetadataResponse(version=request.version, cluster_id=ctx.header.client_id)
        out = bytearray()
        md.RESPONSE.encode_into(response, out)
        return bytes(out)

    def memo(self, state: Any, version: int, listener: str) -> AnswerMemo:
        assert listener == PLAINTEXT
        assert version == 12
        return self._memo


def _counted_connection() -> tuple[_Counting, ServerConnection, MemoryTransport]:
    """A connection whose Metadata handler (with its memo) counts which path answered."""
    h = _Counting()
    registry = HandlerRegistry()
    registry.register(md.API, h.handle, memo=h.memo)
    conn = ServerConnection(ServingInfo(PLAINTEXT, False, registry, None, ConnectionLimits()), lambda _c: None)
    transport = MemoryTransport()
    conn.connection_made(transport)
    return h, conn, transport


#: two memoised requests that differ only in their body
ONE = md.MetadataRequest(version=12, topics=(md.MetadataRequestTopic(name="a"),))
OTHER = md.MetadataRequest(version=12, topics=(md.MetadataRequestTopic(name="b"),))


def _answers(transport: MemoryTransport) -> list[bytes]:
    splitter = FrameSplitter()
    return [f for chunk in transport.written for f in splitter.feed(chunk)]


async def test_memo_answers_repeated_headers_and_keeps_correlation_ids() -> None:
    h, conn, transport = _counted_connection()
    one, other = ONE, OTHER
    conn.data_received(_frame(one, 1))  # full path: learns the header, fills the memo
    conn.data_received(_frame(one, 2) + _frame(one, 3))  # memo hits, pipelined
    conn.data_received(_frame(other, 4))  # memo miss: full path
    conn.data_received(_frame(one, 5, client_id="other"))  # another client id: full path
    answers = _answers(transport)
    assert [int.from_bytes(a[:4], "big") for a in answers] == [1, 2, 3, 4, 5]
    assert h.handled == 3
    # flexible v12: response header v1 (correlation id + empty tags) then the same body
    assert answers[1][4:] == answers[0][4:] == answers[2][4:]
    assert answers[4][4:] != answers[0][4:]  # answered for the "other" client id
    assert len(h.memo_calls) == 3  # frames 2, 3 and 4 (the header of 5 differs)
    assert conn.requests_handled == 5


async def test_broker_memo_answers_equal_the_full_path() -> None:
    state = broker_state()
    brokers = [live_broker(1, {PLAINTEXT: ("127.0.0.1", 9092)})]
    state.cache.update_metadata(0, update_metadata(brokers, {"t": [partition(0, 1, (1,))]}))
    fast = ConnectionPair(state)
    for version in (1, 9, 12):
        request = md.MetadataRequest(version=version, topics=(md.MetadataRequestTopic(name="t"),))
        answers = [fast.raw(fast.encode(request, cid))[0] for cid in (7, 8, 9)]
        fresh = ConnectionPair(state)  # no learned header: the full path
        expected = fresh.raw(fresh.encode(request, 8))[0]
        assert answers[1] == expected
        assert [int.from_bytes(a[:4], "big") for a in answers] == [7, 8, 9]
        assert len({a[4:] for a in answers}) == 1
    # a new snapshot: the memo lives on the old one, so the answer changes
    state.cache.update_metadata(1, update_metadata(brokers, {"t": [partition(0, 1, (1,)), partition(1, 1, (1,))]}))
    request = md.MetadataRequest(version=12, topics=(md.MetadataRequestTopic(name="t"),))
    response = fast.decode(request, fast.raw(fast.encode(request, 10))[0])
    assert len(response.topics[0].partitions) == 2


async def test_memo_paths_answer_as_the_full_path_however_the_reads_fall() -> None:
    """A small (framed) and a large (pieces) memoised answer, each request whole in its own
    read (MemoPath.answer_read), all pipelined in one read (answer_frames), and cut into 7-byte
    reads (the splitter): the same bytes as a connection that serves each by the full path."""
    state = broker_state()
    brokers = [live_broker(1, {PLAINTEXT: ("127.0.0.1", 9092)})]
    topics = {f"topic-{t:03d}": [partition(p, 1, (1,)) for p in range(4)] for t in range(300)}
    state.cache.update_metadata(0, update_metadata(brokers, topics))
    one = md.MetadataRequest(version=12, topics=(md.MetadataRequestTopic(name="topic-007"),))
    every = md.MetadataRequest(version=12, topics=None)
    requests = [one, one, every, one, every, every, one]

    def expected(cid: int, request: Any) -> bytes:
        fresh = ConnectionPair(state)  # nothing learned: the full path
        return fresh.raw(fresh.encode(request, cid))[0]

    want = [expected(cid, r) for cid, r in enumerate(requests)]
    assert len(want[2]) > 32 * 1024  # large enough to be kept as pieces
    per_read, pipelined, cut = ConnectionPair(state), ConnectionPair(state), ConnectionPair(state)
    frames = [per_read.encode(r, cid) for cid, r in enumerate(requests)]
    assert [a for f in frames for a in per_read.raw(f)] == want
    assert pipelined.raw(b"".join(frames)) == want
    stream = b"".join(frames)
    got = [a for k in range(0, len(stream), 7) for a in cut.raw(stream[k : k + 7])]
    assert got == want
    for pair in (per_read, pipelined, cut):
        assert pair.server.requests_handled == len(requests)


async def test_pipelined_read_with_a_miss_looks_each_frame_up_once() -> None:
    """A pipelined read answered in place up to a memo miss: the missed frame takes the full
    path without a second lookup, the frames after it are looked up again, answers in order."""
    h, conn, transport = _counted_connection()
    one, other = ONE, OTHER
    conn.data_received(_frame(one, 1))  # full path: learns the header, fills the memo
    conn.data_received(_frame(one, 2) + _frame(other, 3) + _frame(one, 4) + _frame(one, 5)[:9])
    conn.data_received(_frame(one, 5)[9:])
    answers = _answers(transport)
    assert [int.from_bytes(a[:4], "big") for a in answers] == [1, 2, 3, 4, 5]
    assert h.handled == 2  # frames 1 and 3
    assert len(h.memo_calls) == 4  # frames 2, 3, 4 and 5, once each
    assert conn.requests_handled == 5
