"""TxnOffsetCommit (api key 28): versions 0-4, client listeners.

Kafka 3.9 semantics (``KafkaApis.handleTxnOffsetCommitRequest``, ``GroupCoordinatorService
.commitTransactionalOffsets``, ``OffsetMetadataManager.commitTransactionalOffset``):

* WRITE on the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; READ on the group,
  else GROUP_AUTHORIZATION_FAILED (every partition). Then per topic as OffsetCommit: READ on it
  (TOPIC_AUTHORIZATION_FAILED), known to the metadata (UNKNOWN_TOPIC_OR_PARTITION). An empty
  group id is INVALID_GROUP_ID.
* The group checks the commit as OffsetCommit's, transactional: a v0-v2 request (no member)
  commits into any group, a group's state is not enforced, a stale member epoch is
  ILLEGAL_GENERATION.
* The offsets are written to the group's ``__consumer_offsets`` partition in a transactional
  batch of the producer (its id and epoch: the log fences an old epoch). They stay pending —
  invisible to OffsetFetch, UNSTABLE_OFFSET_COMMIT to a ``require_stable`` fetch — until the
  transaction's COMMIT marker reaches that partition (an ABORT drops them).
* Before v2 COORDINATOR_LOAD_IN_PROGRESS is answered COORDINATOR_NOT_AVAILABLE (clients before
  2.0 did not retry the former, KAFKA-7296).

Versions: v2 leader epoch; v3 member id, generation, group instance id and flexible; v4 the
TRANSACTION_ABORTABLE error (KIP-890).
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import txn_offset_commit as tc
from kmeta.server.group.offsets.offsets_api import (
    answers_in_order,
    commit_offsets,
    filter_topics,
    group_allowed,
)
from kmeta.server.group.offsets.offsets_groups import OffsetsGroup
from kmeta.server.group.offsets.offsets_requests import CommitPartition
from kmeta.server.state import BrokerContext, BrokerRegistry


def _index(p: tc.TxnOffsetCommitRequestPartition) -> int:
    return p.partition_index


async def handle(ctx: BrokerContext, request: tc.TxnOffsetCommitRequest) -> tc.TxnOffsetCommitResponse:
    topics = [(t.name, t.partitions) for t in request.topics]
    everywhere: ErrorCode | None = None
    if not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        everywhere = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not group_allowed(ctx, AclOperation.READ, request.group_id):
        everywhere = ErrorCode.GROUP_AUTHORIZATION_FAILED
    if everywhere is not None:
        errors = {(name, p.partition_index): everywhere for name, parts in topics for p in parts}
    else:
        split = filter_topics(ctx, topics, _index)
        errors = split.errors
        if split.accepted and not request.group_id:
            errors.update(((n, p.partition_index), ErrorCode.INVALID_GROUP_ID) for n, parts in split.accepted for p in parts)
        elif split.accepted:
            version = request.version

            def validate(group: OffsetsGroup) -> ErrorCode:
                error = group.validate_offset_commit(
                    request.member_id, request.group_instance_id, request.generation_id, True, version
                )
                return ErrorCode.ILLEGAL_GENERATION if error is ErrorCode.STALE_MEMBER_EPOCH else error

            accepted = [
                (name, [CommitPartition(p.partition_index, p.committed_offset, p.committed_leader_epoch,
                                        p.committed_metadata) for p in parts])
                for name, parts in split.accepted
            ]  # fmt: skip
            errors.update(
                await commit_offsets(
                    ctx, request.group_id, accepted, validate,
                    producer_id=request.producer_id, producer_epoch=request.producer_epoch,
                )
            )
    if request.version < 2:
        errors = {
            k: ErrorCode.COORDINATOR_NOT_AVAILABLE if e is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else e
            for k, e in errors.items()
        }
    return tc.TxnOffsetCommitResponse(
        version=request.version,
        topics=tuple(
            tc.TxnOffsetCommitResponseTopic(name, tuple(tc.TxnOffsetCommitResponsePartition(i, e) for i, e in answers))
            for name, answers in answers_in_order(topics, _index, errors)
        ),
    )


def register(registry: BrokerRegistry) -> None:
    registry.register(tc.API, handle, on_control=False)
