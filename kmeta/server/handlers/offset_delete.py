"""OffsetDelete (api key 47): version 0, client listeners.

Kafka 3.9 semantics (``KafkaApis.handleOffsetDeleteRequest``, ``GroupCoordinatorService
.deleteOffsets``, ``OffsetMetadataManager.deleteOffsets``, ``ClassicGroup.validateOffsetDelete``):

* DELETE on the group, else GROUP_AUTHORIZATION_FAILED (top level, no topics). Per topic: READ
  on it (TOPIC_AUTHORIZATION_FAILED), known to the metadata (UNKNOWN_TOPIC_OR_PARTITION). An
  empty group id is INVALID_GROUP_ID.
* The group's coordinator (NOT_COORDINATOR elsewhere, COORDINATOR_LOAD_IN_PROGRESS while
  loading) checks the group: unknown GROUP_ID_NOT_FOUND; a classic group with members whose
  protocol type is not "consumer" NON_EMPTY_GROUP (top level).
* A topic the group's members subscribe to: GROUP_SUBSCRIBED_TO_TOPIC for each of its
  partitions. Otherwise each partition answers NONE, and a tombstone is written for those with
  a committed (or pending transactional) offset; a failed write is the top-level error.
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import offset_delete as od
from kmeta.server.group.offsets.offset_records import Record
from kmeta.server.group.offsets.offsets_api import (
    OFFSET_COMMIT_TIMEOUT_S,
    answers_in_order,
    filter_topics,
    group_allowed,
    groups_runtime,
)
from kmeta.server.group.offsets.offsets_groups import offsets_group, offsets_of
from kmeta.server.group.shard import GroupCoordinatorShard
from kmeta.server.state import BrokerContext, BrokerRegistry


def _index(p: od.OffsetDeleteRequestPartition) -> int:
    return p.partition_index


def _error(error: ErrorCode) -> od.OffsetDeleteResponse:
    return od.OffsetDeleteResponse(error_code=error)


async def handle(ctx: BrokerContext, request: od.OffsetDeleteRequest) -> od.OffsetDeleteResponse:
    group_id = request.group_id
    if not group_allowed(ctx, AclOperation.DELETE, group_id):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    topics = [(t.name, t.partitions) for t in request.topics]
    split = filter_topics(ctx, topics, _index)
    errors = split.errors
    if not group_id:
        return _error(ErrorCode.INVALID_GROUP_ID)
    runtime = groups_runtime(ctx)

    def op(shard: GroupCoordinatorShard) -> tuple[list[Record], ErrorCode]:
        group = offsets_group(shard, group_id)
        error = group.validate_offset_delete()
        if error is not ErrorCode.NONE:
            return [], error
        records: list[Record] = []
        for name, parts in split.accepted:
            if group.is_subscribed_to_topic(name):
                errors.update(((name, p.partition_index), ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC) for p in parts)
            else:
                records += offsets_of(shard).delete_offset_records(group_id, name, (p.partition_index for p in parts))
        return records, ErrorCode.NONE

    error, checked = await runtime.write_op(runtime.partition_for(group_id), op, timeout_s=OFFSET_COMMIT_TIMEOUT_S)
    if checked is None or checked is not ErrorCode.NONE or error is not ErrorCode.NONE:
        return _error(error if checked is None or error is not ErrorCode.NONE else checked)
    return od.OffsetDeleteResponse(
        topics=tuple(
            od.OffsetDeleteResponseTopic(name, tuple(od.OffsetDeleteResponsePartition(i, e) for i, e in answers))
            for name, answers in answers_in_order(topics, _index, errors)
        ),
    )


def register(registry: BrokerRegistry) -> None:
    registry.register(od.API, handle, on_control=False)
