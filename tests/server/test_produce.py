"""Produce: Kafka's answers for each case, in memory (no socket), with record batches built by
kafka-python's encoder (an independent implementation of the format); what is acknowledged is
in the leader's log (read back through it)."""

from __future__ import annotations

import struct
import zlib

import pytest

from kmeta.net.principal import KafkaPrincipal
from kmeta.net.security.acl import AclBinding, AclOperation, ResourceType
from kmeta.net.security.authorizer import AclSet, AuthorizerConfig, parse_super_users
from kmeta.protocol.errors import ErrorCode as E
from kmeta.protocol.messages import api_versions as av
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.messages import produce as pr
from kmeta.protocol.records.record_batch import check_produce_records
from kmeta.server.state import BrokerState
from tests.server.data_plane import as_stored, batch, holding, leader_and_isr, only, produce, recrc
from tests.server.helpers import CONTROL, ConnectionPair

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")


def stored(state: BrokerState, topic: str = "orders", index: int = 0) -> bytes:
    """Every record byte the partition's log holds (none: no log was made)."""
    log = state.replica_manager.log_manager.get(topic, index)
    if log is None:
        return b""
    return bytes(log.read(log.log_start_offset, 1 << 30, None, True).records)


async def test_produce_and_fetch_are_advertised() -> None:
    pair = ConnectionPair(holding())
    ranges = {k.api_key: (k.min_version, k.max_version) for k in pair.request(av.ApiVersionsRequest(version=3)).api_keys}
    assert (ranges[0], ranges[1]) == ((0, 11), (4, 17))  # (v0-2: legacy sets up-converted, as Kafka 3.x)


@pytest.mark.parametrize("version", [3, 5, 8, 9, 11])
async def test_the_leader_acknowledges_with_offsets_advancing_by_the_record_count(version: int) -> None:
    state = holding()
    pair = ConnectionPair(state)
    one, two = batch(3), batch(5)
    first = only(pair.request(produce("orders", 0, one, version=version)))
    assert (first.error_code, first.base_offset) == (0, 0)
    second = only(pair.request(produce("orders", 0, two, version=version, acks=1)))
    assert (second.error_code, second.base_offset) == (0, 3)
    assert second.log_append_time_ms == -1  # CreateTime
    assert second.log_start_offset == (0 if version >= 5 else -1)  # (-1: not in v3-4)
    assert second.current_leader is None
    # stored as sent, base offset and leader epoch (4) written in place
    assert stored(state) == as_stored(one, 0, 4) + as_stored(two, 3, 4)


async def test_not_the_leader_says_who_is_from_v10() -> None:
    pair = ConnectionPair(holding())
    v10 = pair.request(produce("orders", 1, batch(), version=10))
    assert only(v10).error_code == E.NOT_LEADER_OR_FOLLOWER
    assert only(v10).base_offset == -1
    assert only(v10).current_leader == pr.LeaderIdAndEpoch(2, 7)
    assert v10.node_endpoints == (pr.NodeEndpoint(2, "127.0.0.1", 9092, None),)
    v9 = pair.request(produce("orders", 1, batch(), version=9))
    assert (only(v9).error_code, only(v9).current_leader, v9.node_endpoints) == (E.NOT_LEADER_OR_FOLLOWER, None, ())
    # broker 2 leads it: accepted there (acks=1: its ISR also holds broker 1, which does not
    # fetch here, so acks=-1 would wait for it)
    assert only(ConnectionPair(holding(broker_id=2)).request(produce("orders", 1, batch(), acks=1))).error_code == 0


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
    state = holding()
    pair = ConnectionPair(state)
    answer = only(pair.request(produce(topic, index, batch(), acks=acks)))
    assert (answer.error_code, answer.base_offset) == (error, -1)
    assert only(pair.request(produce("orders", 0, batch(2)))).base_offset == 0  # nothing was stored


async def test_min_insync_replicas_with_acks_all() -> None:
    state = holding()
    snap = state.cache.snapshot
    state.cache.snapshot = type(snap)(**{**{f: getattr(snap, f) for f in snap.__dataclass_fields__}, "topic_configs": {"orders": {"min.insync.replicas": "2"}}})  # type: ignore[misc]
    pair = ConnectionPair(state)
    assert only(pair.request(produce("orders", 0, batch()))).error_code == E.NOT_ENOUGH_REPLICAS
    assert only(pair.request(produce("orders", 0, batch(), acks=1))).error_code == 0  # acks=1 does not wait for the ISR


def _legacy_entry() -> bytes:
    """A message set entry of format v1 (what old clients send)."""
    body = struct.pack(">bbq", 1, 0, 0) + struct.pack(">i", -1) + struct.pack(">i", 5) + b"hello"
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


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
        ("legacy message set", _legacy_entry(), E.INVALID_RECORD),
    ]


@pytest.mark.parametrize(("records", "error"), [(r, e) for _, r, e in _bad_batches()], ids=[n for n, _, _ in _bad_batches()])
async def test_bad_records_get_kafkas_error(records: bytes | None, error: E) -> None:
    state = holding()
    pair = ConnectionPair(state)
    answer = only(pair.request(produce("orders", 0, records)))
    assert (answer.error_code, answer.base_offset) == (error, -1)
    assert not pair.transport.closed
    assert stored(state) == b""  # nothing stored, not even half


async def test_sizes_and_compression_by_version() -> None:
    big = batch(1)
    too_large = batch(1, value=b"x" * 1_100_000)
    state = holding()
    pair = ConnectionPair(state)
    answer = only(pair.request(produce("orders", 0, too_large)))
    assert answer.error_code == E.MESSAGE_TOO_LARGE
    assert "exceeds the maximum configured value of 1048588" in (answer.error_message or "")
    large = batch(4, value=b"y" * 50_000)
    accepted = only(pair.request(produce("orders", 0, large)))
    assert (accepted.error_code, accepted.base_offset) == (0, 0)
    assert only(pair.request(produce("orders", 0, batch(1)))).base_offset == 4
    assert stored(state)[: len(large)] == as_stored(large, 0, 4)
    zstd = recrc(big[:22] + bytes([big[22] | 4]) + big[23:])  # attributes say zstd
    assert check_produce_records(6, zstd).error == E.UNSUPPORTED_COMPRESSION_TYPE
    assert check_produce_records(7, zstd).error == E.NONE  # (not decompressed: the CRC vouches)


async def test_transactional_batches_without_a_coordinator() -> None:
    state = holding()
    pair = ConnectionPair(state)
    records = batch(transactional=True, producer_id=7)
    assert only(pair.request(produce("orders", 0, records))).error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # the first batch of a transaction needs its coordinator to vouch for it (KIP-890); none
    # can be asked here: NOT_ENOUGH_REPLICAS, which the producer retries, as Kafka maps it
    refused = only(await pair.request_awaited(produce("orders", 0, records, txn="tx-1")))
    assert refused.error_code == E.NOT_ENOUGH_REPLICAS
    assert stored(state) == b""
    idempotent = batch(producer_id=7)  # idempotent, not transactional: stored
    assert only(pair.request(produce("orders", 0, idempotent))).error_code == 0
    assert stored(state) == as_stored(idempotent, 0, 4)


async def test_acks_0_gets_no_answer_and_an_error_closes_the_connection() -> None:
    pair = ConnectionPair(holding())
    meta = md.MetadataRequest(version=12, topics=())
    frames = pair.raw(pair.encode(produce("orders", 0, batch(2), acks=0)) + pair.encode(meta))
    assert len(frames) == 1  # only Metadata's answer, in order
    assert pair.decode(meta, frames[0]).brokers
    assert only(pair.request(produce("orders", 0, batch(1)))).base_offset == 2  # the 2 were counted
    assert pair.raw(pair.encode(produce("orders", 1, batch(), acks=0))) == []  # not the leader
    assert pair.transport.closed


async def test_write_on_the_topic_with_an_authorizer() -> None:
    authz = AuthorizerConfig(True, parse_super_users("User:ANONYMOUS"))  # (the control pair)
    state = holding(authorizer=authz)
    assert state.authorizer is not None
    allow = AclBinding(ResourceType.TOPIC, "orders", 3, "User:alice", "*", AclOperation.WRITE, 3)
    state.authorizer.replace(AclSet([allow]))
    alice = ConnectionPair(state)
    alice.server.principal = KafkaPrincipal("User", "alice")
    assert only(alice.request(produce("orders", 0, batch()))).error_code == 0
    bob = ConnectionPair(state)
    bob.server.principal = KafkaPrincipal("User", "bob")
    assert only(bob.request(produce("orders", 0, batch()))).error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert only(bob.request(produce("nope", 0, batch()))).error_code == E.TOPIC_AUTHORIZATION_FAILED  # before existence


async def test_the_leader_hint_follows_leader_and_isr_before_update_metadata() -> None:
    state = holding()
    ctl = ConnectionPair(state, CONTROL, is_control=True)
    moved = {"orders": [(0, 2, (1, 2), (2, 1), 5)]}  # broker 2 leads at epoch 5; no UpdateMetadata yet
    assert ctl.request(leader_and_isr(moved)).error_code == 0
    answer = ConnectionPair(state).request(produce("orders", 0, batch(), version=10))
    assert only(answer).error_code == E.NOT_LEADER_OR_FOLLOWER
    assert only(answer).current_leader == pr.LeaderIdAndEpoch(2, 5)  # (the cache still says 1, epoch 4)
    assert answer.node_endpoints == (pr.NodeEndpoint(2, "127.0.0.1", 9092, None),)
