"""DeleteRecords (api key 21): versions 0-2, client listeners.

Kafka 3.9 semantics (``KafkaApis.handleDeleteRecordsRequest``, ``ReplicaManager.deleteRecords``,
``Partition.deleteRecordsOnLeader``, ``UnifiedLog.maybeIncrementLogStartOffset``), per partition:

* DELETE on the topic (with an authorizer), else TOPIC_AUTHORIZATION_FAILED; a partition the
  metadata does not know: UNKNOWN_TOPIC_OR_PARTITION.
* An internal topic (``__consumer_offsets``, ``__transaction_state``): INVALID_TOPIC_EXCEPTION.
* No replica here, or a follower: NOT_LEADER_OR_FOLLOWER.
* A topic whose ``cleanup.policy`` lacks ``delete`` (compact only): POLICY_VIOLATION.
* ``offset`` -1 means the high watermark; any other negative offset, or one beyond the high
  watermark: OFFSET_OUT_OF_RANGE. An offset at or below the log start changes nothing.
* Else the log start moves up to the offset (whole segments below it are dropped, and fetches
  below it answer OFFSET_OUT_OF_RANGE) and ``low_watermark`` is the new log start.
* Errors carry low watermark -1.

Kafka then waits (``DelayedDeleteRecords``, up to ``timeout_ms``) until the low watermark -
the smallest log start over the leader and its live followers - reaches the offset. No
follower replicates yet (issue 29 adds them), so the leader's own log start is the low
watermark and the answer goes at once.

Versions: v1 same as v0; v2 flexible.
"""

from __future__ import annotations

from kmeta.log.errors import LogError
from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import delete_records as dr
from kmeta.server.handlers.metadata import INTERNAL_TOPICS
from kmeta.server.replica.partition_lookup import local_partition
from kmeta.server.state import BrokerContext, BrokerRegistry

#: DeleteRecordsRequest.HIGH_WATERMARK
HIGH_WATERMARK = -1


def handle(ctx: BrokerContext, request: dr.DeleteRecordsRequest) -> dr.DeleteRecordsResponse:
    snap = ctx.state.cache.snapshot
    # Kafka keys the request by partition: one named twice is deleted once, at its last offset
    offsets: dict[str, dict[int, int]] = {}
    for t in request.topics:
        for p in t.partitions:
            offsets.setdefault(t.name, {})[p.partition_index] = p.offset
    topics = []
    for name, wanted in offsets.items():
        may_delete = allowed(ctx, AclOperation.DELETE, ResourceType.TOPIC, name)
        known = snap.partition_states.get(name)
        parts = []
        for index, offset in wanted.items():
            if not may_delete:
                error, low = ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1
            elif known is None or index not in known:
                error, low = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
            else:
                policy = snap.topic_configs.get(name, {}).get("cleanup.policy", "delete")
                error, low = _delete(ctx, name, index, offset, policy)
            parts.append(dr.DeleteRecordsPartitionResult(index, low, error))
        topics.append(dr.DeleteRecordsTopicResult(name, tuple(parts)))
    return dr.DeleteRecordsResponse(version=request.version, topics=tuple(topics))


def _delete(ctx: BrokerContext, topic: str, index: int, requested: int, policy: str) -> tuple[ErrorCode, int]:
    if topic in INTERNAL_TOPICS:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, -1
    found = local_partition(ctx.state.replica_manager, topic, index, -1, require_leader=True)
    if isinstance(found, ErrorCode):
        return found, -1
    log = found.log
    if "delete" not in (part.strip() for part in policy.split(",")):
        return ErrorCode.POLICY_VIOLATION, -1
    offset = log.high_watermark if requested == HIGH_WATERMARK else requested
    if offset < 0 or offset > log.high_watermark:
        return ErrorCode.OFFSET_OUT_OF_RANGE, -1
    if offset > log.log_start_offset:
        try:
            log.delete_records_before(offset)
        except LogError as exc:  # (a segment file that would not go: KAFKA_STORAGE_ERROR)
            return exc.error, -1
    return ErrorCode.NONE, log.log_start_offset


def register(registry: BrokerRegistry) -> None:
    registry.register(dr.API, handle, on_control=False)
