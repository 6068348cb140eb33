"""Produce (--accept-produce): Kafka's answers for each case, in memory (no socket), with
record batches built by kafka-python's encoder (an independent implementation of the format)."""

from __future__ import annotations

import asyncio
import struct
import warnings

import pytest

with warnings.catch_warnings():  # kafka-python uses importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.record.util import calc_crc32c

from kmeta.net.principal import KafkaPrincipal
from kmeta.net.security.acl import AclBinding, AclOperation, ResourceType
from kmeta.net.security.authorizer import AclSet, AuthorizerConfig, parse_super_users
from kmeta.protocol.errors import ErrorCode as E
from kmeta.protocol.framing import FrameSplitter
from kmeta.protocol.messages import api_versions as av
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.messages import produce as pr
from kmeta.protocol.record_batch import check_produce_records
from kmeta.server.config import BrokerConfig, ListenerSpec
from kmeta.server.handlers import served_modules
from kmeta.server.state import BrokerState
from tests.server.helpers import (
    CONTROL,
    PLAINTEXT,
    ConnectionPair,
    broker_state,
    live_broker,
    partition,
    update_metadata,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")

WITH_PRODUCE = served_modules(accept_produce=True)


def batch(n: int = 3, *, transactional: bool = False, producer_id: int = -1, compression: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=transactional, producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1, base_sequence=0 if producer_id >= 0 else -1, batch_size=1 << 20,
    )  # fmt: skip
    for i in range(n):
        builder.append(i, timestamp=None, key=None, value=b"value-%d" % i, headers=[])
    return bytes(builder.build())


def recrc(data: bytes) -> bytes:
    """The batch with its CRC-32C recomputed (kafka-python's) after an edit."""
    return data[:17] + struct.pack(">I", calc_crc32c(data[21:])) + data[21:]


def state_with_topics(broker_id: int = 1, **config: object) -> BrokerState:
    """Broker ``broker_id`` holding ``orders`` (partition 0 led by 1, partition 1 by 2, ISR of
    one) and the internal ``__consumer_offsets`` (led by 1)."""
    if config:
        state = BrokerState(BrokerConfig(
            broker_id=broker_id, listeners=(ListenerSpec(PLAINTEXT, "127.0.0.1", 0), ListenerSpec(CONTROL, "127.0.0.1", 0)),
            cluster_id="kmeta-test", **config,  # type: ignore[arg-type]
        ))  # fmt: skip
    else:
        state = broker_state(broker_id)
    brokers = [live_broker(i, {PLAINTEXT: ("127.0.0.1", 9090 + i)}, rack=None) for i in (1, 2)]
    topics = {
        "orders": [partition(0, 1, (1, 2), isr=(1,), leader_epoch=4), partition(1, 2, (2, 1), leader_epoch=7)],
        "__consumer_offsets": [partition(0, 1, (1,))],
    }
    ctl = ConnectionPair(state, CONTROL, is_control=True)
    assert ctl.request(update_metadata(brokers, topics)).error_code == 0
    return state


def produce(topic: str, index: int, records: bytes | None, *, version: int = 9, acks: int = -1, txn: str | None = None):
    data = (pr.TopicProduceData(topic, (pr.PartitionProduceData(index, records),)),)
    return pr.ProduceRequest(version=version, transactional_id=txn, acks=acks, timeout_ms=1000, topic_data=data)


def only(response) -> pr.PartitionProduceResponse:
    [topic] = response.responses
    [part] = topic.partition_responses
    return part


async def test_not_advertised_without_the_flag_and_advertised_with_it() -> None:
    without = ConnectionPair(state_with_topics())
    keys = {k.api_key for k in without.request(av.ApiVersionsRequest(version=3)).api_keys}
    assert 0 not in keys
    assert without.raw(without.encode(produce("orders", 0, batch()))) == []  # unknown API: closed
    assert without.transport.closed
    with_flag = ConnectionPair(state_with_topics(), modules=WITH_PRODUCE)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in with_flag.request(av.ApiVersionsRequest(version=3)).api_keys}
    assert ranges[0] == (3, 11)


@pytest.mark.parametrize("version", [3, 5, 8, 9, 11])
async def test_the_leader_acknowledges_with_offsets_advancing_by_the_record_count(version: int) -> None:
    pair = ConnectionPair(state_with_topics(), modules=WITH_PRODUCE)
    first = only(pair.request(produce("orders", 0, batch(3), version=version)))
    assert (first.error_code, first.base_offset) == (0, 0)
    second = only(pair.request(produce("orders", 0, batch(5), version=version, acks=1)))
    assert (second.error_code, second.base_offset) == (0, 3)
    assert second.log_append_time_ms == -1  # CreateTime
    assert second.log_start_offset == (0 if version >= 5 else -1)  # (-1: not in v3-4)
    assert second.current_leader is None


async def test_not_the_leader_says_who_is_from_v10() -> None:
    pair = ConnectionPair(state_with_topics(), modules=WITH_PRODUCE)
    v10 = pair.request(produce("orders", 1, batch(), version=10))
    assert only(v10).error_code == E.NOT_LEADER_OR_FOLLOWER
    assert only(v10).base_offset == -1
    assert only(v10).current_leader == pr.LeaderIdAndEpoch(2, 7)
    assert v10.node_endpoints == (pr.NodeEndpoint(2, "127.0.0.1", 9092, None),)
    v9 = pair.request(produce("orders", 1, batch(), version=9))
    assert (only(v9).error_code, only(v9).current_leader, v9.node_endpoints) == (E.NOT_LEADER_OR_FOLLOWER, None, ())
    # broker 2 leads it: accepted there
    assert only(ConnectionPair(state_with_topics(2), modules=WITH_PRODUCE).request(produce("orders", 1, batch()))).error_code == 0


@pytest.mark.parametrize(
    ("topic", "index", "acks", "error"),
    [
        ("nope", 0, -1, E.UNKNOWN_TOPIC_OR_PARTITION),
        ("orders", 9, -1, E.UNKNOWN_TOPIC_OR_PARTITION),
        ("orders", 0, 2, E.INVALID_REQUIRED_ACKS),
        ("orders", 0, -2, E.INVALID_REQUIRED_ACKS),
        ("__consumer_offsets", 0, 1, E.INVALID_TOPIC_EXCEPTION),
    ],
)
async def test_kafka_errors_per_partition(topic: str, index: int, acks: int, error: E) -> None:
    pair = ConnectionPair(state_with_topics(), modules=WITH_PRODUCE)
    answer = only(pair.request(produce(topic, index, batch(), acks=acks)))
    assert (answer.error_code, answer.base_offset) == (error, -1)
    assert only(pair.request(produce("orders", 0, batch(2)))).base_offset == 0  # nothing was counted


async def test_min_insync_replicas_with_acks_all() -> None:
    state = state_with_topics()
    snap = state.cache.snapshot
    state.cache.snapshot = type(snap)(**{**{f: getattr(snap, f) for f in snap.__dataclass_fields__}, "topic_configs": {"orders": {"min.insync.replicas": "2"}}})  # type: ignore[misc]
    pair = ConnectionPair(state, modules=WITH_PRODUCE)
    assert only(pair.request(produce("orders", 0, batch()))).error_code == E.NOT_ENOUGH_REPLICAS
    assert only(pair.request(produce("orders", 0, batch(), acks=1))).error_code == 0  # acks=1 does not wait for the ISR


async def checked_off_loop(pair: ConnectionPair, request: pr.ProduceRequest) -> pr.ProduceResponse:
    """A request large enough to have its records checked in a worker thread: answered later."""
    before = len(pair.transport.written)
    pair.server.data_received(pair.encode(request))
    assert len(pair.transport.written) == before  # not answered on the spot
    for _ in range(1000):
        if len(pair.transport.written) > before:
            break
        await asyncio.sleep(0.01)
    splitter = FrameSplitter()
    [answer] = [f for chunk in pair.transport.written[before:] for f in splitter.feed(chunk)]
    return pair.decode(request, answer)


def _bad_batches() -> list[tuple[str, bytes | None, E]]:
    good = batch(3)
    flipped = bytearray(good)
    flipped[-1] ^= 0xFF
    return [
        ("crc mismatch", bytes(flipped), E.CORRUPT_MESSAGE),
        ("length below the minimum", good[:8] + struct.pack(">i", 13) + good[12:], E.CORRUPT_MESSAGE),
        ("claims more than it carries", good[:8] + struct.pack(">i", len(good) + 100) + good[12:], E.INVALID_RECORD),
        ("cut short", good[:-5], E.INVALID_RECORD),
        ("empty", b"", E.INVALID_RECORD),
        ("null", None, E.INVALID_RECORD),
        ("two batches", good + good, E.INVALID_RECORD),
        ("base offset not 0", struct.pack(">q", 5) + good[8:], E.INVALID_RECORD),
        ("count disagrees with offsets", recrc(good[:57] + struct.pack(">i", 2) + good[61:]), E.INVALID_RECORD),
        ("control batch", recrc(good[:22] + bytes([good[22] | 0x20]) + good[23:]), E.INVALID_RECORD),
        ("unknown magic", good[:16] + b"\x07" + good[17:], E.CORRUPT_MESSAGE),
    ]


@pytest.mark.parametrize(("records", "error"), [(r, e) for _, r, e in _bad_batches()], ids=[n for n, _, _ in _bad_batches()])
async def test_bad_records_get_kafkas_error(records: bytes | None, error: E) -> None:
    pair = ConnectionPair(state_with_topics(), modules=WITH_PRODUCE)
    answer = only(pair.request(produce("orders", 0, records)))
    assert (answer.error_code, answer.base_offset) == (error, -1)
    assert not pair.transport.closed


async def test_sizes_and_compression_by_version() -> None:
    big = batch(1)
    big_batch = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 22)
    big_batch.append(0, timestamp=None, key=None, value=b"x" * 1_100_000, headers=[])
    too_large = bytes(big_batch.build())
    pair = ConnectionPair(state_with_topics(), modules=WITH_PRODUCE)
    answer = only(await checked_off_loop(pair, produce("orders", 0, too_large)))
    assert answer.error_code == E.MESSAGE_TOO_LARGE
    assert "exceeds the maximum configured value of 1048588" in (answer.error_message or "")
    large = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 22)
    for i in range(4):
        large.append(i, timestamp=None, key=None, value=b"y" * 50_000, headers=[])
    accepted = only(await checked_off_loop(pair, produce("orders", 0, bytes(large.build()))))
    assert (accepted.error_code, accepted.base_offset) == (0, 0)
    assert only(pair.request(produce("orders", 0, batch(1)))).base_offset == 4
    zstd = recrc(big[:22] + bytes([big[22] | 4]) + big[23:])  # attributes say zstd
    assert check_produce_records(6, zstd).error == E.UNSUPPORTED_COMPRESSION_TYPE
    assert check_produce_records(7, zstd).error == E.NONE  # (not decompressed: the CRC vouches)


async def test_transactional_batches_without_a_coordinator() -> None:
    pair = ConnectionPair(state_with_topics(), modules=WITH_PRODUCE)
    records = batch(transactional=True, producer_id=7)
    assert only(pair.request(produce("orders", 0, records))).error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert only(pair.request(produce("orders", 0, records, txn="tx-1"))).error_code == E.INVALID_TXN_STATE
    idempotent = batch(producer_id=7)  # idempotent, not transactional: accepted
    assert only(pair.request(produce("orders", 0, idempotent))).error_code == 0


async def test_acks_0_gets_no_answer_and_an_error_closes_the_connection() -> None:
    pair = ConnectionPair(state_with_topics(), modules=WITH_PRODUCE)
    meta = md.MetadataRequest(version=12, topics=())
    frames = pair.raw(pair.encode(produce("orders", 0, batch(2), acks=0)) + pair.encode(meta))
    assert len(frames) == 1  # only Metadata's answer, in order
    assert pair.decode(meta, frames[0]).brokers
    assert only(pair.request(produce("orders", 0, batch(1)))).base_offset == 2  # the 2 were counted
    assert pair.raw(pair.encode(produce("orders", 1, batch(), acks=0))) == []  # not the leader
    assert pair.transport.closed


async def test_write_on_the_topic_with_an_authorizer() -> None:
    authz = AuthorizerConfig(True, parse_super_users("User:ANONYMOUS"))  # (the control pair)
    state = state_with_topics(authorizer=authz)
    assert state.authorizer is not None
    allow = AclBinding(ResourceType.TOPIC, "orders", 3, "User:alice", "*", AclOperation.WRITE, 3)
    state.authorizer.replace(AclSet([allow]))
    alice = ConnectionPair(state, modules=WITH_PRODUCE)
    alice.server.principal = KafkaPrincipal("User", "alice")
    assert only(alice.request(produce("orders", 0, batch()))).error_code == 0
    bob = ConnectionPair(state, modules=WITH_PRODUCE)
    bob.server.principal = KafkaPrincipal("User", "bob")
    assert only(bob.request(produce("orders", 0, batch()))).error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert only(bob.request(produce("nope", 0, batch()))).error_code == E.TOPIC_AUTHORIZATION_FAILED  # before existence


async def test_legacy_message_sets_as_librdkafka_sends_them_without_fetch() -> None:
    # librdkafka keeps to MsgVersion 1 unless the broker advertises Fetch v4+ (kmeta serves none)
    body = struct.pack(">bbq", 1, 0, 0) + struct.pack(">i", -1) + struct.pack(">i", 5) + b"hello"
    import zlib

    message = struct.pack(">I", zlib.crc32(body)) + body
    entry = struct.pack(">qi", 0, len(message)) + message
    pair = ConnectionPair(state_with_topics(), modules=WITH_PRODUCE)
    assert only(pair.request(produce("orders", 0, entry + entry, version=10))).base_offset == 0
    assert only(pair.request(produce("orders", 0, entry))).base_offset == 2
    corrupt = entry[:-1] + b"!"
    assert only(pair.request(produce("orders", 0, corrupt))).error_code == E.CORRUPT_MESSAGE
