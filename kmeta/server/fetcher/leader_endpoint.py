"""What a follower asks the leader it fetches from, as requests (Kafka's ``LeaderEndPoint``,
``RemoteLeaderEndPoint``): the Fetch (``buildFetch``), the OffsetForLeaderEpoch of a
truncation (``fetchEpochEndOffsets``) and the ListOffsets of an out-of-range fetch
(``fetchEarliestOffset`` / ``fetchLatestOffset``), each at the highest version both sides speak.

Apart from :mod:`kmeta.server.fetcher.replica_fetcher`, whose loop decides when to ask and what to do
with the answers: here is only what goes on the wire and the replica.fetch.* sizes it carries.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import fetch as fe
from kmeta.protocol.messages import list_offsets as lo
from kmeta.protocol.messages import offset_for_leader_epoch as ofle
from kmeta.protocol.registry import highest_common
from kmeta.server.to_controller.controller_connection import call

if TYPE_CHECKING:
    from kmeta.server.fetcher.partition_fetch_state import PartitionFetchState
    from kmeta.server.replica.partition import Partition

Key = tuple[str, int]

#: Kafka's replica.fetch.wait.max.ms, replica.fetch.min.bytes, replica.fetch.max.bytes and
#: replica.fetch.response.max.bytes
FETCH_WAIT_MAX_MS = 500
FETCH_MIN_BYTES = 1
FETCH_MAX_BYTES = 1_048_576
FETCH_RESPONSE_MAX_BYTES = 10_485_760
#: Fetch versions a follower uses (v12: last fetched epoch and diverging epoch)
FETCH_VERSIONS = range(12, 18)
#: ListOffsets' timestamps for the log start and the log end (Kafka's ``ListOffsetsRequest``)
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1


def fetch_request(
    versions: dict[int, range], leader_id: int, me: int, broker_epoch: int,
    wanted: dict[Key, tuple[PartitionFetchState, int, Partition | None]],
) -> fe.FetchRequest:  # fmt: skip
    """One Fetch of ``wanted`` (state, offset, partition if its log was made), at the highest
    version both sides speak (v13+ names topics by id: v12 when a topic has none)."""
    by_topic: dict[str, list[fe.FetchPartition]] = {}
    ids: dict[str, uuid.UUID | None] = {}
    for (topic, index), (state, offset, partition) in wanted.items():
        # (a log not made yet: empty, at 0)
        last = None if partition is None else partition.log.latest_epoch
        by_topic.setdefault(topic, []).append(fe.FetchPartition(
            partition=index, current_leader_epoch=state.current_leader_epoch,
            fetch_offset=offset, last_fetched_epoch=-1 if last is None else last,
            log_start_offset=0 if partition is None else partition.log.log_start_offset,
            partition_max_bytes=FETCH_MAX_BYTES,
        ))  # fmt: skip
        ids[topic] = state.topic_id
    top = 17 if all(i is not None for i in ids.values()) else 12  # (v13+ names topics by id)
    version = highest_common(versions, ApiKey.FETCH, range(FETCH_VERSIONS.start, top + 1))
    if version is None:
        raise ConnectionError(f"leader {leader_id} does not serve Fetch v12+")
    return fe.FetchRequest(
        version=version, replica_id=me if version < 15 else -1,
        replica_state=fe.ReplicaState(me, broker_epoch) if version >= 15 else None,
        max_wait_ms=FETCH_WAIT_MAX_MS, min_bytes=FETCH_MIN_BYTES,
        max_bytes=FETCH_RESPONSE_MAX_BYTES, isolation_level=0, session_id=0, session_epoch=-1,
        topics=tuple(
            fe.FetchTopic(topic=t, topic_id=ids[t] or ZERO_UUID, partitions=tuple(ps))
            for t, ps in by_topic.items()
        ),
    )  # fmt: skip


def epoch_end_offsets_request(
    versions: dict[int, range], me: int, asks: dict[Key, tuple[int, int]]
) -> ofle.OffsetForLeaderEpochRequest:
    """One OffsetForLeaderEpoch (v3+, as replica ``me``) asking where the leader's copy of
    each partition's epoch ends; ``asks`` maps a partition to (current leader epoch, epoch)."""
    by_topic: dict[str, list[ofle.OffsetForLeaderPartition]] = {}
    for (topic, index), (current_leader_epoch, epoch) in asks.items():
        by_topic.setdefault(topic, []).append(
            ofle.OffsetForLeaderPartition(index, current_leader_epoch, epoch)
        )
    version = highest_common(versions, ApiKey.OFFSET_FOR_LEADER_EPOCH, range(3, 5))
    if version is None:
        raise ConnectionError("the leader does not serve OffsetForLeaderEpoch v3+")
    return ofle.OffsetForLeaderEpochRequest(
        version=version, replica_id=me,
        topics=tuple(ofle.OffsetForLeaderTopic(t, tuple(ps)) for t, ps in by_topic.items()),
    )  # fmt: skip


async def list_offset(
    conn: KafkaConnection,
    versions: dict[int, range],
    me: int,
    key: Key,
    leader_epoch: int,
    which: int,
) -> int | None:
    """The leader's earliest (-2) or latest (-1) offset of ``key`` (ListOffsets as replica ``me``)."""
    version = highest_common(versions, ApiKey.LIST_OFFSETS, range(1, 8))
    if version is None:
        raise ConnectionError("the leader does not serve ListOffsets v1+")
    request = lo.ListOffsetsRequest(
        version=version, replica_id=me,
        topics=(lo.ListOffsetsTopic(key[0], (
            lo.ListOffsetsPartition(key[1], leader_epoch, which),
        )),),
    )  # fmt: skip
    response = await call(conn, request)
    for t in response.topics:
        for p in t.partitions:
            if (t.name, p.partition_index) == key and p.error_code == ErrorCode.NONE:
                return int(p.offset)
    return None
