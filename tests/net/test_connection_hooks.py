"""Connection hooks over real sockets: an observer hears typed events, a gate admits API keys."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from kmeta.net import api_versions as api_versions_handler
from kmeta.net.dispatch import HandlerRegistry, RequestContext
from kmeta.net.hooks import ConnectionHooks, FaultKind
from kmeta.net.inbound.server_connection import ServerConnection
from kmeta.net.listener import Listener
from kmeta.net.principal import ANONYMOUS, KafkaPrincipal
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.messages import api_versions as av
from kmeta.protocol.messages import metadata as md
from kmeta.server.broker import Broker
from tests.server.helpers import (
    PLAINTEXT,
    assert_healthy,
    broker_with_topics,
    closed_by_peer,
    encode_frame,
    read_frame,
)


def _with_api_key(api_key: int) -> bytes:
    raw = bytearray(encode_frame(md.MetadataRequest(version=1, topics=()), 1))
    raw[4:6] = api_key.to_bytes(2, "big")
    return bytes(raw)


@dataclass
class Recorder:
    """Records every event of one connection, in order."""

    conn: ServerConnection
    events: list[tuple[object, ...]] = field(default_factory=list)
    async_answers: list[asyncio.Future[object]] = field(default_factory=list)

    def on_read(self, nbytes: int) -> None:
        self.events.append(("read", nbytes))

    def on_request(self, api_key: int, api_version: int, answer: asyncio.Future[object] | None) -> None:
        self.events.append(("request", api_key, api_version, answer is None))
        if answer is not None:
            self.async_answers.append(answer)

    def on_answers_ready(self) -> None:
        self.events.append(("ready",))

    def on_write(self, nbytes: int) -> None:
        self.events.append(("write", nbytes))

    def on_fault(self, kind: FaultKind, detail: str) -> None:
        self.events.append(("fault", kind, detail))

    def on_close(self) -> None:
        self.events.append(("close",))

    def of(self, name: str) -> list[tuple[object, ...]]:
        return [e for e in self.events if e[0] == name]


class Gate:
    """Admits ApiVersions only until ``authenticated`` (what a SASL authenticator does)."""

    def __init__(self) -> None:
        self.authenticated = False
        self.asked: list[int] = []

    def admits(self, api_key: int) -> bool:
        self.asked.append(api_key)
        return self.authenticated or api_key == ApiKey.API_VERSIONS


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    b = await broker_with_topics(5, connections_max_idle_ms=60_000)
    yield b
    await b.stop()


def _observe(broker: Broker) -> list[Recorder]:
    made: list[Recorder] = []

    def factory(conn: ServerConnection) -> Recorder:
        made.append(Recorder(conn))
        return made[-1]

    for lst in broker.listeners:
        lst.hooks = ConnectionHooks(observer=factory)
    return made


async def _wait(check: object, timeout_s: float = 3.0) -> None:
    assert callable(check)
    for _ in range(int(timeout_s / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def test_observer_hears_reads_requests_writes_and_close(broker: Broker) -> None:
    made = _observe(broker)
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port(PLAINTEXT))
    pipelined = encode_frame(av.ApiVersionsRequest(version=3), 1) + encode_frame(
        md.MetadataRequest(version=12, topics=None), 2
    )
    writer.write(pipelined)
    await read_frame(reader)
    await read_frame(reader)
    writer.close()
    await _wait(lambda: made and made[0].of("close"))
    rec = made[0]
    assert rec.of("request") == [
        ("request", ApiKey.API_VERSIONS, 3, True),
        ("request", ApiKey.METADATA, 12, True),
    ]
    assert sum(int(e[1]) for e in rec.of("read")) == len(pipelined)  # type: ignore[call-overload]
    assert rec.of("ready")  # the synchronous answers were reported ready after their read
    assert rec.events.index(rec.of("ready")[0]) > rec.events.index(rec.of("request")[-1])
    assert sum(int(e[1]) for e in rec.of("write")) > 0  # type: ignore[call-overload]
    assert rec.of("fault") == []  # the peer closing is not a fault
    assert rec.events[-1] == ("close",)


@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        (b"\x7f\xff\xff\xff" + b"x" * 10, FaultKind.FRAME_TOO_LARGE),
        (b"\x00\x00\x00\x03\x00\x03\x00", FaultKind.CORRUPT_MESSAGE),
        (_with_api_key(999), FaultKind.UNSUPPORTED_VERSION),
    ],
    ids=["frame-too-large", "truncated-header", "unknown-api-key"],
)
async def test_a_fault_is_reported_once_with_its_kind(broker: Broker, payload: bytes, kind: FaultKind) -> None:
    made = _observe(broker)
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port(PLAINTEXT))
    writer.write(payload)
    assert await closed_by_peer(reader)
    writer.close()
    await _wait(lambda: made and made[0].of("close"))
    faults = made[0].of("fault")
    assert [f[1] for f in faults] == [kind]
    assert made[0].conn.fault is kind
    await assert_healthy(broker.port(PLAINTEXT), "t1")


async def test_idle_timeout_is_a_typed_fault() -> None:
    b = await broker_with_topics(1, connections_max_idle_ms=150)
    try:
        made = _observe(b)
        reader, writer = await asyncio.open_connection("127.0.0.1", b.port(PLAINTEXT))
        assert await closed_by_peer(reader, 3.0)
        writer.close()
        await _wait(lambda: made and made[0].of("close"))
        assert [f[1] for f in made[0].of("fault")] == [FaultKind.IDLE_TIMEOUT]
    finally:
        await b.stop()


async def test_gate_serves_only_what_it_admits_then_everything(broker: Broker) -> None:
    gates: list[Gate] = []

    def make_gate(_conn: ServerConnection) -> Gate:
        gates.append(Gate())
        return gates[-1]

    made = _observe(broker)
    for lst in broker.listeners:
        lst.hooks = lst.hooks.with_gate(make_gate)
    port = broker.port(PLAINTEXT)

    # before authentication: ApiVersions is served, Metadata closes the connection
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode_frame(av.ApiVersionsRequest(version=3), 1))
    assert int.from_bytes((await read_frame(reader))[:4], "big") == 1
    writer.write(encode_frame(md.MetadataRequest(version=12, topics=None), 2))
    assert await closed_by_peer(reader)
    writer.close()
    await _wait(lambda: made and made[0].of("close"))
    assert [f[1] for f in made[0].of("fault")] == [FaultKind.AUTHENTICATION_REQUIRED]
    assert gates[0].asked == [ApiKey.API_VERSIONS, ApiKey.METADATA]

    # once the gate admits everything, repeated requests are served (and it keeps deciding)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await _wait(lambda: len(gates) == 2)
    gates[1].authenticated = True
    request = md.MetadataRequest(version=12, topics=(md.MetadataRequestTopic(name="t1"),))
    for cid in range(3):
        writer.write(encode_frame(request, 10 + cid))
        assert int.from_bytes((await read_frame(reader))[:4], "big") == 10 + cid
    assert ApiKey.METADATA in gates[1].asked
    writer.close()


async def test_a_handler_completes_authentication_through_ctx_gate() -> None:
    """How a SaslAuthenticate handler will attach (issue 15): the connection's gate reaches
    the handler in its context, the handler completes authentication on it, and from then on
    the gate admits everything on that connection only."""
    registry = HandlerRegistry()

    def authenticate(ctx: RequestContext, request: object) -> object:
        assert isinstance(ctx.gate, Gate)
        ctx.gate.authenticated = True  # here a SASL exchange would have succeeded
        return api_versions_handler.handle(ctx, request)

    registry.register(av.API, authenticate)
    registry.register(
        md.API, lambda _ctx, request: md.MetadataResponse(version=request.version)
    )
    lst = Listener("PLAINTEXT", "127.0.0.1", 0, is_control=False, registry=registry, state=None)
    lst.hooks = ConnectionHooks(gate=lambda _conn: Gate())
    await lst.start()
    try:
        metadata = encode_frame(md.MetadataRequest(version=12, topics=None), 2)
        reader, writer = await asyncio.open_connection("127.0.0.1", lst.port)
        writer.write(encode_frame(av.ApiVersionsRequest(version=3), 1) + metadata)
        assert int.from_bytes((await read_frame(reader))[:4], "big") == 1
        assert int.from_bytes((await read_frame(reader))[:4], "big") == 2
        # another connection has its own gate: not authenticated
        reader2, writer2 = await asyncio.open_connection("127.0.0.1", lst.port)
        writer2.write(metadata)
        assert await closed_by_peer(reader2)
        writer.close()
        writer2.close()
    finally:
        await lst.shutdown(1.0)


async def test_handlers_see_the_principal_the_gate_established() -> None:
    """ctx.principal is User:ANONYMOUS until the connection's gate sets conn.principal; from
    then on every request of that connection (and only that one) carries it."""
    seen: list[str] = []
    registry = HandlerRegistry()

    def metadata(ctx: RequestContext, request: md.MetadataRequest) -> md.MetadataResponse:
        seen.append(str(ctx.principal))
        return md.MetadataResponse(version=request.version)

    registry.register(md.API, metadata)
    conns: list[ServerConnection] = []

    def make_gate(conn: ServerConnection) -> Gate:
        conns.append(conn)
        gate = Gate()
        gate.authenticated = True
        return gate

    lst = Listener("PLAINTEXT", "127.0.0.1", 0, is_control=False, registry=registry, state=None)
    lst.hooks = ConnectionHooks(gate=make_gate)
    await lst.start()
    try:
        request = encode_frame(md.MetadataRequest(version=12, topics=None), 1)
        reader, writer = await asyncio.open_connection("127.0.0.1", lst.port)
        writer.write(request)
        await read_frame(reader)
        conns[0].principal = KafkaPrincipal("User", "alice")
        writer.write(request)
        await read_frame(reader)
        reader2, writer2 = await asyncio.open_connection("127.0.0.1", lst.port)
        writer2.write(request)
        await read_frame(reader2)
        assert seen == ["User:ANONYMOUS", "User:alice", "User:ANONYMOUS"]
        assert KafkaPrincipal("User", "ANONYMOUS") == ANONYMOUS
        writer.close()
        writer2.close()
    finally:
        await lst.shutdown(1.0)


async def test_slow_answers_are_held_while_may_answer_says_no_and_leave_in_order_after() -> None:
    """A quorum controller's hook (its lease): a slow answer ``may_answer(answer)`` holds
    back waits, and those behind it, in order, asked again as they are written; the
    connection stays open."""
    registry = HandlerRegistry()

    async def metadata(_ctx: RequestContext, request: md.MetadataRequest) -> md.MetadataResponse:
        await asyncio.sleep(0)
        return md.MetadataResponse(version=request.version)

    registry.register(md.API, metadata)
    lease = [False]
    lst = Listener("PLAINTEXT", "127.0.0.1", 0, is_control=False, registry=registry, state=None)
    lst.hooks = ConnectionHooks().with_may_answer(lambda _answer: lease[0])
    await lst.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", lst.port)
        for correlation_id in (1, 2, 3):
            writer.write(encode_frame(md.MetadataRequest(version=12, topics=None), correlation_id))
        first = asyncio.ensure_future(read_frame(reader))
        await asyncio.sleep(0.3)  # (six hold polls)
        assert not first.done()
        lease[0] = True
        ids = [int.from_bytes((await first)[:4], "big")]
        ids += [int.from_bytes((await read_frame(reader))[:4], "big") for _ in range(2)]
        assert ids == [1, 2, 3]
        writer.close()
    finally:
        await lst.shutdown(1.0)
