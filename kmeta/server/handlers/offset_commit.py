"""OffsetCommit (api key 8): versions 0-9, client listeners.

Kafka 3.9 semantics (``KafkaApis.handleOffsetCommitRequest``, ``GroupCoordinatorService
.commitOffsets``, ``OffsetMetadataManager.commitOffset``, ``ClassicGroup.validateOffsetCommit``):

* READ on the group, else GROUP_AUTHORIZATION_FAILED for every partition. Then per topic: READ
  on it, else TOPIC_AUTHORIZATION_FAILED; a topic or partition the metadata does not know:
  UNKNOWN_TOPIC_OR_PARTITION. The rest goes to the group's coordinator, the broker leading its
  ``__consumer_offsets`` partition: elsewhere NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS while
  that partition loads.
* The group checks the commit (``kmeta.server.group.offsets.offsets_groups``): generation -1 with no
  member id commits into an empty group or one nobody joined (a standalone consumer, the admin
  client); a member commits with its generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
  FENCED_INSTANCE_ID for a static member's stale id, REBALANCE_IN_PROGRESS while the group
  completes a rebalance); an unknown group with a generation is ILLEGAL_GENERATION before v9,
  GROUP_ID_NOT_FOUND from v9. A KIP-848 consumer group checks member epochs itself (v9).
* Metadata longer than offset.metadata.max.bytes (4096): OFFSET_METADATA_TOO_LARGE for that
  partition; the others are written as OffsetCommit records to ``__consumer_offsets`` with
  acks=all and answered once replicated. A failed write answers every partition its error
  (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...).

Versions: v0 keeps no member (Kafka stored v0 commits in ZooKeeper; kmeta keeps every version's
in ``__consumer_offsets``); v1 member id, generation and a per-partition commit timestamp; v2-v4
retention time (the offsets then expire at commit time + retention, as Kafka); v5 drops it (the
broker's offsets.retention.minutes); v6 leader epoch; v7 group instance id; v8 flexible; v9 KIP-848.
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import offset_commit as oc
from kmeta.server.group.offsets.offsets_api import (
    answers_in_order,
    commit_offsets,
    filter_topics,
    group_allowed,
)
from kmeta.server.group.offsets.offsets_groups import OffsetsGroup
from kmeta.server.group.offsets.offsets_requests import CommitPartition
from kmeta.server.state import BrokerContext, BrokerRegistry


def _index(p: oc.OffsetCommitRequestPartition) -> int:
    return p.partition_index


async def handle(ctx: BrokerContext, request: oc.OffsetCommitRequest) -> oc.OffsetCommitResponse:
    topics = [(t.name, t.partitions) for t in request.topics]
    if not group_allowed(ctx, AclOperation.READ, request.group_id):
        errors = {(name, p.partition_index): ErrorCode.GROUP_AUTHORIZATION_FAILED for name, parts in topics for p in parts}
    else:
        split = filter_topics(ctx, topics, _index)
        errors = split.errors
        if split.accepted:
            version = request.version

            def validate(group: OffsetsGroup) -> ErrorCode:
                return group.validate_offset_commit(
                    request.member_id, request.group_instance_id, request.generation_id_or_member_epoch, False, version
                )

            accepted = [
                (name, [CommitPartition(p.partition_index, p.committed_offset, p.committed_leader_epoch,
                                        p.committed_metadata, p.commit_timestamp) for p in parts])
                for name, parts in split.accepted
            ]  # fmt: skip
            errors.update(
                await commit_offsets(
                    ctx, request.group_id, accepted, validate, retention_time_ms=request.retention_time_ms,
                    member_id=request.member_id,
                )
            )
    return oc.OffsetCommitResponse(
        version=request.version,
        topics=tuple(
            oc.OffsetCommitResponseTopic(name, tuple(oc.OffsetCommitResponsePartition(i, e) for i, e in answers))
            for name, answers in answers_in_order(topics, _index, errors)
        ),
    )


def register(registry: BrokerRegistry) -> None:
    registry.register(oc.API, handle, on_control=False)
