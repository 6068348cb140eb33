"""The broker's whole request path, driven in memory: bytes in, checked outcome out.

Shared by the atheris harness (``fuzz/fuzz_request_path.py``) and the hypothesis suite
(``tests/hardening/test_fuzz_request_path.py``). A real :class:`ServerConnection` with the real
broker registry and a real :class:`BrokerState` sits on a memory transport; :meth:`feed`
pushes bytes through it (split into chunks), lets asynchronous handlers finish, and checks the
outcome is a defined one:

* nothing raises out of ``data_received`` and no handler failure is logged (those are ours);
* every answer is a well-formed frame whose correlation id is that of the request it answers,
  in request order; either every complete request is answered (but a Produce with acks=0,
  which gets no answer, as in Kafka) or the connection was closed;
* nothing stays pending (no hang): asynchronous handlers finish within ``settle_s``;
* afterwards a fresh connection on the same state still answers Metadata correctly.

Inputs for the control listener (which may change the cache) get a fresh state each time, so a
finding replays the same way.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import uuid
from collections.abc import Iterator
from typing import Any

from fuzz.coordinator_seeds import SESSION_MS, coordinator_frames
from fuzz.data_plane_seeds import data_plane_frames, seed_leader_and_isr
from kmeta.net.connection import api_of_instance
from kmeta.net.inbound.server_connection import ConnectionLimits, ServerConnection, ServingInfo
from kmeta.protocol.framing import FrameSplitter, frame
from kmeta.protocol.header import (
    RequestHeader,
    decode_request_header,
    encode_request_header,
)
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import fetch as fe
from kmeta.protocol.messages import join_group as jg
from kmeta.protocol.messages import leader_and_isr as lai
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.messages import produce as pr
from kmeta.protocol.messages import sync_group as sg
from kmeta.protocol.messages import update_metadata as um
from kmeta.server.config import BrokerConfig, ListenerSpec
from kmeta.server.handlers import build_registry
from kmeta.server.state import BrokerState

PLAINTEXT, CONTROL = "PLAINTEXT", "CONTROL"
SEED_TOPIC = "fuzz-seed"
#: the coordinators' topics, one partition each, led by the seeded broker (in memory only)
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
#: small enough that "giant" declared sizes are refused from the prefix, as in production
MAX_FRAME_SIZE = 1 << 20


class RequestPathFailure(AssertionError):
    """An outcome that is not a defined one (a finding)."""


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False

    def write(self, data: Any) -> None:
        if self.closed:
            raise RequestPathFailure("write after close")
        self.written += data

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default


class _ErrorLog(logging.Handler):
    """Collects ERROR records with a traceback: a handler that raised (our bug).

    ERROR records without one are Kafka's own complaints about what a peer sent (e.g. the
    cache's "Listeners are not identical across brokers" on an UpdateMetadata), not failures.
    """

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info is not None:
            self.records.append(record)


def encode_request(request: Any, correlation_id: int, client_id: str = "fuzz") -> bytes:
    """A whole frame (length prefix included) for ``request``."""
    api = api_of_instance(request)
    out = bytearray()
    encode_request_header(RequestHeader(api.key, request.version, correlation_id, client_id), out)
    api.request.encode_into(request, out)
    return frame(out)


def seed_update_metadata(broker_id: int = 1, internal: bool = False) -> Any:
    """What the controller would push: this broker alive, one topic of two partitions (and
    ``internal``: the coordinators' topics of one partition each)."""
    brokers = (
        um.UpdateMetadataBroker(
            id=broker_id,
            endpoints=(um.UpdateMetadataEndpoint(port=9092, host="127.0.0.1", listener=PLAINTEXT),),
        ),
    )
    parts = tuple(
        um.UpdateMetadataPartitionState(
            partition_index=p, controller_epoch=1, leader=broker_id, leader_epoch=1,
            isr=(broker_id,), zk_version=0, replicas=(broker_id,), offline_replicas=(),
        )
        for p in range(2)
    )  # fmt: skip
    topics = [um.UpdateMetadataTopicState(
        topic_name=SEED_TOPIC, topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, SEED_TOPIC),
        partition_states=parts,
    )]  # fmt: skip
    for name in INTERNAL_TOPICS if internal else ():
        topics.append(um.UpdateMetadataTopicState(
            topic_name=name, topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, name), partition_states=parts[:1],
        ))  # fmt: skip
    return um.UpdateMetadataRequest(
        version=8, controller_id=3000, controller_epoch=1, broker_epoch=-1,
        topic_states=tuple(topics), live_brokers=brokers,
    )  # fmt: skip


def _health_request() -> bytes:
    req = md.MetadataRequest(version=12, topics=(md.MetadataRequestTopic(name=SEED_TOPIC),))
    return encode_request(req, 7)


def _internal_leaders() -> Any:
    """The seeded broker leads partition 0 of each coordinator topic."""
    request = seed_leader_and_isr(SEED_TOPIC)
    states = tuple(
        seed_leader_and_isr(name).topic_states[0]._replace(
            partition_states=seed_leader_and_isr(name).topic_states[0].partition_states[:1]
        )
        for name in INTERNAL_TOPICS
    )
    return request._replace(topic_states=request.topic_states + states)


_SEED = encode_request(seed_update_metadata(internal=True), 1)
_SEED_LEADERS = encode_request(_internal_leaders(), 2)
_HEALTH = _health_request()


async def _coordinators_loaded(state: BrokerState, timeout_s: float = 10.0) -> None:
    runtimes = (state.coordinators.groups, state.coordinators.transactions)
    deadline = asyncio.get_running_loop().time() + timeout_s
    while any(r.shard_or_error(0)[0] is None for r in runtimes):
        if asyncio.get_running_loop().time() > deadline:
            raise RuntimeError("the coordinator shards did not load")
        await asyncio.sleep(0.01)


class RequestPath:
    """One broker (state + registry); :meth:`feed` runs one input through a new connection."""

    def __init__(self, loop: asyncio.AbstractEventLoop, settle_s: float = 2.0) -> None:
        self.loop = loop
        self.settle_s = settle_s
        self.registry = build_registry()
        self.limits = ConnectionLimits(max_frame_size=MAX_FRAME_SIZE, max_queued_requests=64)
        self.errors = _ErrorLog()
        logging.getLogger("kmeta").addHandler(self.errors)
        self.client_state = self._seeded_state()
        self.inputs = 0
        self.closed_connections = 0
        self.answers = 0

    def close(self) -> None:
        self.client_state.close()
        logging.getLogger("kmeta").removeHandler(self.errors)

    # -- states ---------------------------------------------------------------------------------
    def _config(self) -> BrokerConfig:
        listeners = (ListenerSpec(PLAINTEXT, "127.0.0.1", 0), ListenerSpec(CONTROL, "127.0.0.1", 0))
        return BrokerConfig(
            broker_id=1, listeners=listeners, cluster_id="kmeta-fuzz",
            # one partition per coordinator topic, led here; joins that complete within the
            # settle time (no initial delay, the seeds' short session timeouts are valid)
            offsets_topic_num_partitions=1, offsets_topic_replication_factor=1,
            transaction_state_log_num_partitions=1, transaction_state_log_replication_factor=1,
            transaction_state_log_min_isr=1, group_initial_rebalance_delay_ms=0,
            group_min_session_timeout_ms=SESSION_MS,
        )  # fmt: skip

    def _seeded_state(self) -> BrokerState:
        state = BrokerState(self._config())
        self.loop.run_until_complete(self._run(state, True, _SEED, len(_SEED)))
        if state.cache.snapshot.partition_count(SEED_TOPIC) != 2:
            raise RuntimeError("the seed UpdateMetadata was not applied")
        # this broker leads the seed topic's partitions: data-plane inputs reach their logs
        self.loop.run_until_complete(self._run(state, True, _SEED_LEADERS, len(_SEED_LEADERS)))
        if (SEED_TOPIC, 0) not in state.replicas:
            raise RuntimeError("the seed LeaderAndIsr was not applied")
        self.loop.run_until_complete(_coordinators_loaded(state))
        return state

    # -- one input ------------------------------------------------------------------------------
    def feed(self, data: bytes, *, control: bool = False, chunk: int = 0) -> None:
        """Run ``data`` through a new connection (``chunk`` > 0: that many bytes per read),
        then a Metadata request through another one on the same state."""
        self.inputs += 1
        state = self._seeded_state() if control else self.client_state
        try:
            self.loop.run_until_complete(self._input_then_health(state, control, data, chunk))
        finally:
            if state is not self.client_state:
                state.close()  # (its coordinators' shards and timers go with it)

    async def _input_then_health(
        self, state: BrokerState, control: bool, data: bytes, chunk: int
    ) -> None:
        closed, answers = await self._run(state, control, data, chunk or len(data) or 1)
        self.closed_connections += closed
        self.answers += answers
        closed, answers = await self._run(state, False, _HEALTH, len(_HEALTH))
        if closed or answers != 1:
            raise RequestPathFailure("a healthy Metadata request was not answered")

    async def _run(
        self, state: BrokerState, control: bool, data: bytes, chunk: int
    ) -> tuple[bool, int]:
        info = ServingInfo(
            CONTROL if control else PLAINTEXT, control, self.registry, state, self.limits
        )
        conn = ServerConnection(info, lambda _c: None)
        transport = _Transport()
        conn.connection_made(transport)
        try:
            for i in range(0, max(len(data), 1), chunk):
                conn.data_received(data[i : i + chunk])
            deadline = self.loop.time() + self.settle_s
            waiting = False  # (a Fetch that rightly waits longer: its answer and later ones)
            while conn.in_flight and not transport.closed:
                if self.loop.time() > deadline:
                    if not _may_wait(data, int(self.settle_s * 1000), state):
                        raise RequestPathFailure(f"{conn.in_flight} requests still pending (hang)")
                    waiting = True
                    break
                await asyncio.sleep(0)
            if self.errors.records:
                record = self.errors.records[0]
                self.errors.records.clear()
                raise RequestPathFailure(f"handler failure logged: {record.getMessage()}") from (
                    record.exc_info[1] if record.exc_info else None
                )
            answers = _check_answers(data, bytes(transport.written), transport.closed or waiting)
            return transport.closed, answers
        finally:
            conn.connection_lost(None)


def _request_frames(data: bytes) -> list[bytes]:
    """The complete frames in ``data`` up to the first one the server would refuse."""
    splitter = FrameSplitter(MAX_FRAME_SIZE)
    try:
        return splitter.feed(data)
    except Exception:
        frames = []
        pos = 0
        while len(data) - pos >= 4:
            (size,) = struct.unpack_from(">i", data, pos)
            if size < 0 or size > MAX_FRAME_SIZE or len(data) - pos - 4 < size:
                break
            frames.append(data[pos + 4 : pos + 4 + size])
            pos += 4 + size
        return frames


def _answered(frame_: bytes) -> bool:
    """False for a request Kafka answers with nothing: a Produce with acks=0 (that decodes)."""
    try:
        header, pos = decode_request_header(frame_)
        if header.api_key != pr.API.key:
            return True
        return bool(pr.REQUEST.decode(frame_, header.api_version, pos).acks != 0)
    except Exception:
        return True


def _may_wait(data: bytes, settle_ms: int, state: BrokerState) -> bool:
    """Whether a request in ``data`` may rightly stay pending past the settle time: a Fetch
    asking for bytes (min_bytes > 0) and to wait longer than that for them (max_wait_ms), as
    Kafka's delayed fetch waits; a JoinGroup or SyncGroup of a group whose rebalance may take
    longer (its own or a member's rebalance timeout), as Kafka's delayed join and sync wait."""
    for frame_ in _request_frames(data):
        try:
            header, pos = decode_request_header(frame_)
            if header.api_key == fe.API.key:
                fetch = fe.REQUEST.decode(frame_, header.api_version, pos)
                if fetch.max_wait_ms > settle_ms and fetch.min_bytes > 0:
                    return True
            elif header.api_key == jg.API.key:
                join = jg.REQUEST.decode(frame_, header.api_version, pos)
                own = max(join.rebalance_timeout_ms, join.session_timeout_ms)
                if max(own, _rebalance_ms(state, join.group_id)) > settle_ms:
                    return True
            elif header.api_key == sg.API.key:
                sync = sg.REQUEST.decode(frame_, header.api_version, pos)
                if _rebalance_ms(state, sync.group_id) > settle_ms:
                    return True
        except Exception:
            continue  # (one that does not decode closes the connection)
    return False


def _rebalance_ms(state: BrokerState, group_id: str) -> int:
    """How long ``group_id``'s rebalance may rightly take: its members' longest rebalance
    timeout; unbounded while its delayed join or sync still has a timer to fire (one set when
    a member with a longer timeout, since gone, was in it: the answers come when it fires);
    0: no such classic group."""
    ctx = state.coordinators.groups._contexts.get(0)  # (the harness looks at the shard's timers)
    if ctx is not None and any(key in ctx._timers for key in (f"join-{group_id}", f"sync-{group_id}")):
        return 1 << 31
    shard, _ = state.coordinators.groups.shard_or_error(0)
    group = None if shard is None else shard.groups.group_or_none(group_id)
    members = getattr(group, "members", None) or {}
    return max((m.rebalance_timeout_ms for m in members.values()), default=0)


def _check_answers(data: bytes, written: bytes, closed: bool) -> int:
    requests = [f for f in _request_frames(data) if _answered(f)]
    try:
        answers = FrameSplitter((1 << 31) - 1).feed(written)
    except Exception as exc:
        raise RequestPathFailure(f"the server wrote a broken frame: {exc}") from exc
    if len(answers) > len(requests):
        raise RequestPathFailure(f"{len(answers)} answers to {len(requests)} requests")
    if not closed and len(answers) != len(requests):
        raise RequestPathFailure(
            f"open connection answered {len(answers)} of {len(requests)} requests"
        )
    for request, answer in zip(requests, answers, strict=False):
        if len(answer) < 4 or answer[:4] != request[4:8]:
            raise RequestPathFailure("answer out of order (correlation id mismatch)")
    return len(answers)


# -- fuzzer inputs ------------------------------------------------------------------------------
CHUNKS = (0, 1, 2, 3, 5, 8, 13, 64)


def decode_input(data: bytes) -> tuple[bytes, bool, int]:
    """A fuzzer input -> (bytes the peer sends, control listener?, read size).

    Byte 0 is flags: bit 0 the control listener; bit 1 the harness adds the length prefix (so
    mutations reach the body); bits 2-4 pick the read size from CHUNKS (0: all at once).
    """
    if not data:
        return b"", False, 0
    flags, rest = data[0], data[1:]
    if flags & 2:
        rest = frame(rest)
    return rest, bool(flags & 1), CHUNKS[(flags >> 2) & 7]


# -- corpus -------------------------------------------------------------------------------------
def valid_requests() -> Iterator[tuple[str, bool, bytes]]:
    """(name, control listener?, frame) for every API and version the broker serves."""
    registry = build_registry()
    for handler in registry:
        api = handler.api
        for version in range(handler.min_version, handler.max_version + 1):
            req = api.request.cls(version=version)
            for control in (False, True):
                yield (
                    f"{api.key}-v{version}-{'ctl' if control else 'cli'}",
                    control,
                    encode_request(req, version + 1),
                )
    yield "metadata-seed", False, _health_request()
    for version in range(9):
        raw = seed_update_metadata()._replace(version=version)
        if version < 5:
            parts = tuple(
                p._replace(topic_name=SEED_TOPIC)
                for t in raw.topic_states
                for p in t.partition_states
            )
            raw = raw._replace(ungrouped_partition_states=parts, topic_states=())
        yield f"update-metadata-v{version}", True, encode_request(raw, 3)
    partition = lai.LeaderAndIsrPartitionState(
        partition_index=0, controller_epoch=1, leader=1, leader_epoch=2, isr=(1,),
        partition_epoch=1, replicas=(1,), is_new=True,
    )  # fmt: skip
    lair = lai.LeaderAndIsrRequest(
        version=6, controller_id=3000, controller_epoch=1, broker_epoch=-1, type=0,
        topic_states=(lai.LeaderAndIsrTopicState(
            topic_name=SEED_TOPIC, topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, SEED_TOPIC),
            partition_states=(partition,),
        ),),
    )  # fmt: skip
    yield "leader-and-isr-v6", True, encode_request(lair, 4)
    create = ct.CreateTopicsRequest(
        version=7, topics=(ct.CreatableTopic(name="new", num_partitions=3, replication_factor=1),),
        timeout_ms=1000,
    )  # fmt: skip
    yield "create-topics-v7", False, encode_request(create, 5)
    yield from data_plane_frames(SEED_TOPIC, encode_request)
    yield from coordinator_frames(SEED_TOPIC, encode_request)
