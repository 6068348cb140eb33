"""ListOffsets (api key 2): versions 0-9, client and control listeners (a follower asks its leader on the control listener).

Kafka 3.9 semantics (``KafkaApis.handleListOffsetRequest``, ``ReplicaManager.fetchOffset``,
``Partition.fetchOffsetForTimestamp``, ``UnifiedLog.fetchOffsetByTimestamp``), per partition:

* DESCRIBE on the topic (with an authorizer), else TOPIC_AUTHORIZATION_FAILED.
* v1+: a partition named twice in the request: INVALID_REQUEST (for each mention). A negative
  timestamp other than the special targets, or a target newer than the version: -3 max
  timestamp needs v7, -4 earliest local v8, -5 latest tiered v9: UNSUPPORTED_VERSION.
* A partition this broker holds no replica of: NOT_LEADER_OR_FOLLOWER if the metadata knows
  it, else UNKNOWN_TOPIC_OR_PARTITION; then ``current_leader_epoch`` (v4+, -1: none) against
  the replica's: older FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH; then a follower
  answers NOT_LEADER_OR_FOLLOWER unless ``replica_id`` is -2 (Kafka's debugging replica id,
  which may read a follower).
* ``replica_id`` -1 (a consumer) reads up to the high watermark (read_uncommitted) or the last
  stable offset (read_committed, v2+: the high watermark until transactions land); any other
  replica id (a broker, or -2) up to the log end. No authorization rides on it, as in Kafka.
* -1 latest: that bound, timestamp -1, the replica's current leader epoch. -2 earliest and -4
  earliest local (no tiered storage: the same): the log start offset, with the epoch of the
  first leader-epoch entry if it starts at or before it. -5 latest tiered: offset -1,
  timestamp -1, epoch -1 (Kafka without remote storage). -3 max timestamp (KIP-734) and a
  timestamp: the log's answer (:meth:`kmeta.log.PartitionLog.offset_for_timestamp`) unless
  it lies at or beyond the bound, then offset -1 / timestamp -1 (as Kafka, no error). No record
  at or after the timestamp: -1 / -1.
* Errors carry offset -1, timestamp -1, leader epoch -1.

v0 (``handleListOffsetRequestV0``, ``UnifiedLog.legacyFetchOffsetsBefore``): timestamps below
-2 UNSUPPORTED_VERSION; else ``old_style_offsets``, at most ``max_num_offsets`` of them,
newest first, taken from the segments' base offsets (each stamped with its file's last change,
for a memory log its last append) plus the log end (stamped now) when the active segment holds
records: -1 starts at the log end, -2 at the log start, a timestamp at the newest entry stamped
at or before it. A consumer's (replica id -1) list is cut to the high watermark. A negative
``max_num_offsets`` fails in Kafka's array allocation: UNKNOWN_SERVER_ERROR.

Versions: v1 one offset and its timestamp (no more max_num_offsets); v2 isolation level and
throttle time; v4 current leader epoch (request) and leader epoch (response); v5
OFFSET_NOT_AVAILABLE (never answered here: a leader's high watermark is its log end until
replication lands); v6 flexible; v7 max timestamp; v8 earliest local; v9 latest tiered.
"""

from __future__ import annotations

import collections
import time

from kmeta.log.partition_log import PartitionLog
from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import list_offsets as lo
from kmeta.server.replica.partition_lookup import CONSUMER_REPLICA_ID, local_partition
from kmeta.server.state import BrokerContext, BrokerRegistry

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
#: ListOffsetsRequest.DEBUGGING_REPLICA_ID: may read a follower's log
DEBUGGING_REPLICA_ID = -2
READ_COMMITTED = 1
#: the first version that may ask for each special target (ReplicaManager's table)
_MIN_VERSION = {EARLIEST: 1, LATEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}


def _error(index: int, error: ErrorCode) -> lo.ListOffsetsPartitionResponse:
    return lo.ListOffsetsPartitionResponse(partition_index=index, error_code=error)


def handle(ctx: BrokerContext, request: lo.ListOffsetsRequest) -> lo.ListOffsetsResponse:
    version: int = request.version
    topics = []
    denied = []
    mentions = collections.Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    #: v1+: Kafka keys its answers by partition, grouped by topic (a topic named twice is one)
    by_topic: dict[str, dict[int, lo.ListOffsetsPartitionResponse]] = {}
    for t in request.topics:
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name):
            denied.append(
                lo.ListOffsetsTopicResponse(
                    t.name,
                    tuple(_error(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions),
                )
            )
        elif version == 0:  # (a list per request entry, as Kafka's v0 path answers)
            topics.append(lo.ListOffsetsTopicResponse(t.name, tuple(_v0(ctx, request.replica_id, t.name, p) for p in t.partitions)))
        else:
            answers = by_topic.setdefault(t.name, {})
            for p in t.partitions:
                duplicate = mentions[(t.name, p.partition_index)] > 1
                answers[p.partition_index] = (
                    _error(p.partition_index, ErrorCode.INVALID_REQUEST) if duplicate else _partition(ctx, request, t.name, p)
                )
    topics += [lo.ListOffsetsTopicResponse(name, tuple(parts.values())) for name, parts in by_topic.items()]
    return lo.ListOffsetsResponse(version=version, topics=tuple(topics + denied))


def _partition(
    ctx: BrokerContext, request: lo.ListOffsetsRequest, topic: str, p: lo.ListOffsetsPartition
) -> lo.ListOffsetsPartitionResponse:
    target: int = p.timestamp
    version: int = request.version
    if target < 0 and (target not in _MIN_VERSION or version < _MIN_VERSION[target]):
        return _error(p.partition_index, ErrorCode.UNSUPPORTED_VERSION)
    replica_id: int = request.replica_id
    found = local_partition(
        ctx.state.replica_manager, topic, p.partition_index, p.current_leader_epoch,
        require_leader=replica_id != DEBUGGING_REPLICA_ID,
    )  # fmt: skip
    if isinstance(found, ErrorCode):
        return _error(p.partition_index, found)
    log, leader_epoch = found.log, found.leader_epoch
    if replica_id != CONSUMER_REPLICA_ID:
        bound = log.log_end_offset
    elif request.isolation_level == READ_COMMITTED:
        bound = log.last_stable_offset
    else:
        bound = log.high_watermark
    answer: tuple[int, int, int] | None
    if target == LATEST:
        answer = (bound, -1, leader_epoch)
    elif target == LATEST_TIERED:
        answer = (-1, -1, -1)
    else:
        answer = log.offset_for_timestamp(EARLIEST if target == EARLIEST_LOCAL else target)
        if answer is not None and target != EARLIEST and target != EARLIEST_LOCAL and answer[0] >= bound:
            answer = None  # (beyond what this reader may fetch: Kafka answers -1 / -1)
    if answer is None:
        return _error(p.partition_index, ErrorCode.NONE)
    offset, timestamp, epoch = answer
    return lo.ListOffsetsPartitionResponse(
        partition_index=p.partition_index,
        error_code=ErrorCode.NONE,
        timestamp=timestamp,
        offset=offset,
        leader_epoch=epoch if version >= 4 else -1,
    )


def _v0(ctx: BrokerContext, replica_id: int, topic: str, p: lo.ListOffsetsPartition) -> lo.ListOffsetsPartitionResponse:
    if p.timestamp < EARLIEST:  # (v0 knows -1 and -2 only)
        return _error(p.partition_index, ErrorCode.UNSUPPORTED_VERSION)
    found = local_partition(ctx.state.replica_manager, topic, p.partition_index, -1, require_leader=replica_id != DEBUGGING_REPLICA_ID)
    if isinstance(found, ErrorCode):
        return _error(p.partition_index, found)
    log = found.log
    if p.max_num_offsets < 0:  # (NegativeArraySizeException in Kafka)
        return _error(p.partition_index, ErrorCode.UNKNOWN_SERVER_ERROR)
    offsets = legacy_offsets_before(log, p.timestamp, p.max_num_offsets, int(time.time() * 1000))
    if replica_id == CONSUMER_REPLICA_ID and any(o > log.high_watermark for o in offsets):
        hw = log.high_watermark
        offsets = [hw] + [o for o in offsets if o <= hw]  # (dropWhile on a descending list)
    return lo.ListOffsetsPartitionResponse(
        partition_index=p.partition_index, error_code=ErrorCode.NONE, old_style_offsets=tuple(offsets)
    )


def legacy_offsets_before(log: PartitionLog, timestamp: int, max_num_offsets: int, now_ms: int) -> list[int]:
    """``UnifiedLog.legacyFetchOffsetsBefore``: segment base offsets (at least the log start)
    with their last-change times, plus the log end stamped now if the active segment holds
    records; from the entry the target picks, back to the oldest, at most ``max_num_offsets``."""
    segments = log.local.segments
    table = [(max(s.base_offset, log.log_start_offset), s.last_modified_ms) for s in segments]
    if segments and segments[-1].size > 0:
        table.append((log.log_end_offset, now_ms))
    if timestamp == LATEST:
        start = len(table) - 1
    elif timestamp == EARLIEST:
        start = 0
    else:
        start = len(table) - 1
        while start >= 0 and table[start][1] > timestamp:
            start -= 1
    count = min(max_num_offsets, start + 1)
    return sorted((table[start - j][0] for j in range(count)), reverse=True)


def register(registry: BrokerRegistry) -> None:
    registry.register(lo.API, handle)
