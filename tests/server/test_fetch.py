"""Fetch: Kafka's answers for each case, in memory (no socket): records come back byte for byte
as the leader's log stored them, sizes and limits as Kafka's readFromLog, epochs fenced,
KIP-951 leader hints, offsets out of range, ACLs, sessions declined."""

from __future__ import annotations

import pytest

from kmeta.net.principal import KafkaPrincipal
from kmeta.net.security.acl import AclBinding, AclOperation, ResourceType
from kmeta.net.security.authorizer import AclSet, AuthorizerConfig, parse_super_users
from kmeta.protocol.errors import ErrorCode as E
from kmeta.protocol.messages import fetch as fe
from kmeta.server.state import BrokerState
from tests.server.data_plane import (
    TOPICS,
    TWO_BROKERS,
    as_stored,
    batch,
    fetch,
    holding,
    metadata_for,
    only,
    produce,
)
from tests.server.helpers import CONTROL, ConnectionPair, topic_id

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")


def filled(batches: list[bytes], state: BrokerState | None = None) -> tuple[ConnectionPair, list[bytes]]:
    """A broker holding TOPICS with ``batches`` produced to orders-0: each as stored."""
    pair = ConnectionPair(state or holding())
    stored, offset = [], 0
    for data in batches:
        answer = only(pair.request(produce("orders", 0, data)))
        assert (answer.error_code, answer.base_offset) == (0, offset)
        stored.append(as_stored(data, offset, 4))
        offset += int.from_bytes(data[57:61], "big")  # (record count)
    return pair, stored


@pytest.mark.parametrize("version", [4, 5, 11, 12, 13, 15, 16, 17])
async def test_what_was_produced_comes_back_byte_for_byte(version: int) -> None:
    pair, stored = filled([batch(3), batch(2, compression=1), batch(1, value=b"x" * 70_000)])
    answer = pair.request(fetch([("orders", 0, 0)], version=version))
    part = only(answer)
    assert (answer.error_code, answer.session_id, part.error_code) == (0, 0, 0)
    assert bytes(part.records) == b"".join(stored)
    assert part.high_watermark == 6
    assert part.last_stable_offset == 6
    assert part.log_start_offset == (0 if version >= 5 else -1)
    assert part.preferred_read_replica == -1
    assert part.aborted_transactions is None  # (read_uncommitted)
    if version >= 13:
        assert answer.responses[0].topic_id == topic_id("orders")
    # from the middle of a batch: the whole batch holding the offset
    assert bytes(only(pair.request(fetch([("orders", 0, 4)], version=version))).records) == b"".join(stored[1:])
    # at the log end: nothing, no error
    at_end = only(pair.request(fetch([("orders", 0, 6)], version=version)))
    assert (at_end.error_code, bytes(at_end.records), at_end.high_watermark) == (0, b"", 6)


async def test_read_committed_reads_to_the_last_stable_offset_with_no_aborted_transactions() -> None:
    pair, stored = filled([batch(2)])
    part = only(pair.request(fetch([("orders", 0, 0)], isolation_level=1)))
    assert (part.error_code, part.last_stable_offset, part.high_watermark) == (0, 2, 2)
    assert part.aborted_transactions == ()
    assert bytes(part.records) == stored[0]


async def test_the_first_batch_is_whole_and_later_ones_keep_within_the_limits() -> None:
    big = [batch(1, value=b"a" * 3000), batch(1, value=b"b" * 3000), batch(1, value=b"c" * 3000)]
    pair, stored = filled(big)
    size = len(stored[0])
    # partition max bytes below one batch: the first batch anyway (KIP-74), and only it
    part = only(pair.request(fetch([("orders", 0, 0)], partition_max_bytes=100)))
    assert bytes(part.records) == stored[0]
    # room for two batches and a half: two
    part = only(pair.request(fetch([("orders", 0, 0)], partition_max_bytes=int(size * 2.5))))
    assert bytes(part.records) == b"".join(stored[:2])
    # request max bytes caps the whole answer; a zero one still gets the first batch
    part = only(pair.request(fetch([("orders", 0, 0)], max_bytes=int(size * 1.5))))
    assert bytes(part.records) == stored[0]
    assert bytes(only(pair.request(fetch([("orders", 0, 0)], max_bytes=0))).records) == stored[0]
    # a second partition in the same request gets only what is left (whole batches)
    assert only(pair.request(produce("orders", 2, big[2]))).error_code == 0
    request = fetch([("orders", 0, 0), ("orders", 2, 0)], max_bytes=int(size * 1.5))
    first, second = pair.request(request).responses[0].partitions
    assert (bytes(first.records), bytes(second.records)) == (stored[0], b"")
    other = as_stored(big[2], 0, 4)
    request = fetch([("orders", 0, 0), ("orders", 2, 0)], max_bytes=size * 2, partition_max_bytes=size)
    first, second = pair.request(request).responses[0].partitions
    assert (bytes(first.records), bytes(second.records)) == (stored[0], other)
    request = fetch([("orders", 0, 0), ("orders", 2, 0)], max_bytes=size * 2)
    first, second = pair.request(request).responses[0].partitions
    assert (bytes(first.records), bytes(second.records)) == (stored[0] + stored[1], b"")
    # the first partition empty: the second's first batch is the one taken whole
    request = fetch([("orders", 0, 3), ("orders", 2, 0)], max_bytes=10)
    first, second = pair.request(request).responses[0].partitions
    assert (bytes(first.records), bytes(second.records)) == (b"", other)


async def test_huge_and_negative_max_bytes() -> None:
    pair, stored = filled([batch(2)])
    huge = only(pair.request(fetch([("orders", 0, 0)], max_bytes=2**31 - 1, partition_max_bytes=2**31 - 1)))
    assert (huge.error_code, bytes(huge.records)) == (0, stored[0])
    negative = only(pair.request(fetch([("orders", 0, 0)], max_bytes=-5)))
    assert (negative.error_code, bytes(negative.records)) == (E.UNKNOWN_SERVER_ERROR, b"")  # as Kafka's segment read
    at_end = only(pair.request(fetch([("orders", 0, 2)], partition_max_bytes=-5)))
    assert (at_end.error_code, at_end.high_watermark) == (0, 2)  # nothing to read: no read, no error
    assert not pair.transport.closed


async def test_offsets_out_of_range_above_the_end_and_below_the_log_start() -> None:
    state = holding()
    pair, stored = filled([batch(2), batch(3), batch(1)], state)
    beyond = only(pair.request(fetch([("orders", 0, 7)])))
    assert (beyond.error_code, beyond.high_watermark, beyond.log_start_offset) == (E.OFFSET_OUT_OF_RANGE, -1, -1)
    partition, error = state.replica_manager.get_partition_or_error("orders", 0)
    assert partition is not None
    assert error == E.NONE
    partition.log.delete_records_before(2)  # (what DeleteRecords does)
    below = only(pair.request(fetch([("orders", 0, 0)])))
    assert below.error_code == E.OFFSET_OUT_OF_RANGE
    part = only(pair.request(fetch([("orders", 0, 2)])))
    assert (part.error_code, part.log_start_offset, bytes(part.records)) == (0, 2, b"".join(stored[1:]))


@pytest.mark.parametrize("version", [9, 12, 15, 16])
async def test_current_leader_epoch_fencing(version: int) -> None:
    pair, stored = filled([batch(1)])
    assert bytes(only(pair.request(fetch([("orders", 0, 0)], version=version, current_leader_epoch=4))).records) == stored[0]
    old = pair.request(fetch([("orders", 0, 0)], version=version, current_leader_epoch=3))
    assert only(old).error_code == E.FENCED_LEADER_EPOCH
    assert only(old).high_watermark == -1
    new = pair.request(fetch([("orders", 0, 0)], version=version, current_leader_epoch=5))
    assert only(new).error_code == E.UNKNOWN_LEADER_EPOCH
    if version >= 16:  # KIP-951: who leads, and where
        assert only(old).current_leader == fe.LeaderIdAndEpoch(1, 4)
        assert old.node_endpoints == (fe.NodeEndpoint(1, "127.0.0.1", 9091, None),)
        assert only(new).current_leader is None
    else:
        assert (only(old).current_leader, old.node_endpoints) == (None, ())


@pytest.mark.parametrize("version", [12, 15, 16, 17])
async def test_not_the_leader_says_who_is_from_v16(version: int) -> None:
    pair = ConnectionPair(holding())  # orders-1: broker 1 follows, 2 leads at epoch 7
    answer = pair.request(fetch([("orders", 1, 0)], version=version))
    assert only(answer).error_code == E.NOT_LEADER_OR_FOLLOWER
    if version >= 16:
        assert only(answer).current_leader == fe.LeaderIdAndEpoch(2, 7)
        assert answer.node_endpoints == (fe.NodeEndpoint(2, "127.0.0.1", 9092, None),)
    else:
        assert (only(answer).current_leader, answer.node_endpoints) == (None, ())


async def test_unknown_topics_partitions_and_ids() -> None:
    pair, _ = filled([batch(1)])
    assert only(pair.request(fetch([("nope", 0, 0)]))).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert only(pair.request(fetch([("orders", 9, 0)]))).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    by_id = fetch([("nope", 0, 0)], version=13)  # (an id nobody has)
    answer = pair.request(by_id)
    assert (answer.responses[0].topic_id, only(answer).error_code) == (topic_id("nope"), E.UNKNOWN_TOPIC_ID)


async def test_a_topic_partition_named_twice_is_answered_once_in_its_first_place() -> None:
    pair, stored = filled([batch(1), batch(1)])
    request = fetch([("orders", 0, 0), ("orders", 2, 0), ("orders", 0, 1)])
    parts = pair.request(request).responses[0].partitions
    assert [p.partition_index for p in parts] == [0, 2]
    assert bytes(parts[0].records) == stored[1]  # (its last fetch offset)


async def test_sessions_are_declined_as_kafka_allows() -> None:
    pair, stored = filled([batch(1)])
    full = pair.request(fetch([("orders", 0, 0)], session_epoch=0))  # asks for a session
    assert (full.error_code, full.session_id, bytes(only(full).records)) == (0, 0, stored[0])
    incremental = pair.request(fetch([("orders", 0, 0)])._replace(session_id=77, session_epoch=1))
    assert (incremental.error_code, incremental.responses) == (E.FETCH_SESSION_ID_NOT_FOUND, ())


async def test_acls_read_for_consumers_and_cluster_action_for_replicas() -> None:
    authz = AuthorizerConfig(True, parse_super_users("User:ANONYMOUS"))  # (the control pair)
    state = holding(authorizer=authz)
    _, stored = filled([batch(1)], state)
    assert state.authorizer is not None
    state.authorizer.replace(AclSet([
        AclBinding(ResourceType.TOPIC, "orders", 3, "User:alice", "*", AclOperation.READ, 3),
    ]))  # fmt: skip
    alice = ConnectionPair(state)
    alice.server.principal = KafkaPrincipal("User", "alice")
    assert bytes(only(alice.request(fetch([("orders", 0, 0)]))).records) == stored[0]
    as_replica = alice.request(fetch([("orders", 0, 0)], replica_id=2))
    assert only(as_replica).error_code == E.TOPIC_AUTHORIZATION_FAILED  # no CLUSTER_ACTION
    bob = ConnectionPair(state)
    bob.server.principal = KafkaPrincipal("User", "bob")
    assert only(bob.request(fetch([("orders", 0, 0)]))).error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert only(bob.request(fetch([("nope", 0, 0)]))).error_code == E.TOPIC_AUTHORIZATION_FAILED


@pytest.mark.parametrize("version", [12, 15])
async def test_replica_fetches_from_replicas_and_from_strangers(version: int) -> None:
    pair, stored = filled([batch(2)])
    follower = only(pair.request(fetch([("orders", 0, 0)], version=version, replica_id=2)))
    assert (follower.error_code, bytes(follower.records)) == (0, stored[0])  # (to the log end)
    stranger = only(pair.request(fetch([("orders", 0, 0)], version=version, replica_id=3)))
    assert stranger.error_code == E.NOT_LEADER_OR_FOLLOWER
    with_epoch = only(pair.request(fetch([("orders", 0, 0)], version=version, replica_id=3, current_leader_epoch=4)))
    assert with_epoch.error_code == E.UNKNOWN_LEADER_EPOCH
    itself = only(pair.request(fetch([("orders", 0, 0)], version=version, replica_id=1)))
    assert itself.error_code == E.NOT_LEADER_OR_FOLLOWER


async def test_a_diverging_last_fetched_epoch_gets_the_epoch_end() -> None:
    pair, _ = filled([batch(2)])  # epoch 4 ends at offset 2
    same = only(pair.request(fetch([("orders", 0, 2)], last_fetched_epoch=4)))
    assert (same.error_code, same.diverging_epoch) == (0, None)
    # an epoch before any of ours: its end is where our first epoch starts (0), below the
    # fetch offset: the fetcher diverged (LeaderEpochFileCache.endOffsetFor)
    behind = only(pair.request(fetch([("orders", 0, 2)], last_fetched_epoch=2)))
    assert (behind.error_code, behind.diverging_epoch, bytes(behind.records)) == (0, fe.EpochEndOffset(2, 0), b"")
    assert behind.high_watermark == 2
    # an epoch we never had past our latest: unknown here
    ahead = only(pair.request(fetch([("orders", 0, 2)], last_fetched_epoch=9)))
    assert ahead.error_code == E.OFFSET_OUT_OF_RANGE


async def test_the_internal_topic_and_topics_in_one_answer() -> None:
    pair, stored = filled([batch(1)])
    request = fetch([("orders", 0, 0), ("__consumer_offsets", 0, 0), ("nope", 0, 0)])
    answer = pair.request(request)
    assert [t.topic for t in answer.responses] == ["orders", "__consumer_offsets", "nope"]
    codes = [p.error_code for t in answer.responses for p in t.partitions]
    assert codes == [0, 0, E.UNKNOWN_TOPIC_OR_PARTITION]
    assert bytes(answer.responses[0].partitions[0].records) == stored[0]
    assert list(TOPICS) == ["orders", "__consumer_offsets"]


async def test_a_zstd_topic_needs_fetch_v10() -> None:
    state = holding()
    pair, stored = filled([batch(1)], state)
    ctl = ConnectionPair(state, CONTROL, is_control=True)
    zstd = metadata_for(TOPICS, TWO_BROKERS, configs={"orders": {"compression.type": "zstd"}})
    assert ctl.request(zstd).error_code == 0
    assert only(pair.request(fetch([("orders", 0, 0)], version=9))).error_code == E.UNSUPPORTED_COMPRESSION_TYPE
    assert bytes(only(pair.request(fetch([("orders", 0, 0)], version=10))).records) == stored[0]
