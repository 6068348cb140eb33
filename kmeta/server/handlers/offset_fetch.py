"""OffsetFetch (api key 9): versions 0-9, client listeners.

Kafka 3.9 semantics (``KafkaApis.handleOffsetFetchRequestFromCoordinator``,
``GroupCoordinatorService.fetchOffsets`` / ``fetchAllOffsets``, ``OffsetMetadataManager
.fetchOffsets`` / ``fetchAllOffsets``), per group (one before v8, several from v8):

* DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED for the group.
* Topics null (v2+): every committed offset of the group, less the topics the principal may not
  DESCRIBE. Topics given: those not DESCRIBE-able answer TOPIC_AUTHORIZATION_FAILED (offset
  -1); each other partition its committed offset, leader epoch and metadata, or -1 / "" when
  none is committed (no error, as Kafka).
* The group's coordinator answers (NOT_COORDINATOR elsewhere, COORDINATOR_LOAD_IN_PROGRESS
  while it loads, as the group's error). A group nobody knows has no offsets: -1 for the
  partitions asked, none for topics null. A KIP-848 group checks the member id and epoch of
  v9 itself (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH).
* ``require_stable`` (v7+): a partition with a transactional offset still pending answers
  UNSTABLE_OFFSET_COMMIT (the consumer retries after the transaction ends).

Versions: v1 reads the offsets topic (v0 read ZooKeeper in Kafka; kmeta answers both from
``__consumer_offsets``); v2 topics null and a top-level error (before v2 a group error is put on
every partition); v3 throttle time; v5 leader epoch; v6 flexible; v7 require_stable; v8 several
groups; v9 member id and epoch (KIP-848).
"""

from __future__ import annotations

from collections.abc import Sequence

from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import offset_fetch as of
from kmeta.server.group.offsets.offsets_api import group_allowed, groups_runtime
from kmeta.server.group.offsets.offsets_groups import offsets_group, offsets_of
from kmeta.server.group.offsets.offsets_requests import FetchedPartition, fetch_offsets
from kmeta.server.group.shard import GroupCoordinatorShard
from kmeta.server.state import BrokerContext, BrokerRegistry

#: a group's answer: (its error, [(topic, partitions)])
GroupAnswer = tuple[ErrorCode, list[tuple[str, list[FetchedPartition]]]]


async def handle(ctx: BrokerContext, request: of.OffsetFetchRequest) -> of.OffsetFetchResponse:
    version = request.version
    if version >= 8:
        groups = [
            (g.group_id, g.member_id, g.member_epoch,
             None if g.topics is None else [(t.name, tuple(t.partition_indexes)) for t in g.topics])
            for g in request.groups
        ]  # fmt: skip
    else:
        topics = None if request.topics is None else [(t.name, tuple(t.partition_indexes)) for t in request.topics]
        groups = [(request.group_id, None, -1, topics)]
    answers = [await _group(ctx, gid, member, epoch, topics, request.require_stable) for gid, member, epoch, topics in groups]
    if version >= 8:
        return of.OffsetFetchResponse(
            version=version,
            groups=tuple(
                of.OffsetFetchResponseGroup(
                    gid,
                    tuple(
                        of.OffsetFetchResponseTopics(name, tuple(
                            of.OffsetFetchResponsePartitions(p.partition, p.offset, p.leader_epoch, p.metadata, p.error)
                            for p in parts))
                        for name, parts in (() if answer[0] else answer[1])
                    ),
                    answer[0],
                )
                for (gid, _, _, _), answer in zip(groups, answers, strict=True)
            ),
        )  # fmt: skip
    return _single(version, answers[0])


def _single(version: int, answer: GroupAnswer) -> of.OffsetFetchResponse:
    """Before v8 (``OffsetFetchResponse(groups, version)``): before v2 a group error goes on
    every partition, which then carries -1 and no metadata."""
    error, topics = answer
    if error is not ErrorCode.NONE:  # (v2+: the top-level error alone, as Kafka answers it)
        topics = [] if version >= 2 else [(n, [FetchedPartition(p.partition, error=error) for p in ps]) for n, ps in topics]
    return of.OffsetFetchResponse(
        version=version,
        topics=tuple(
            of.OffsetFetchResponseTopic(name, tuple(
                of.OffsetFetchResponsePartition(p.partition, p.offset, p.leader_epoch, p.metadata, p.error)
                for p in parts))
            for name, parts in topics
        ),
        error_code=error if version >= 2 else ErrorCode.NONE,
    )  # fmt: skip


async def _group(
    ctx: BrokerContext,
    group_id: str,
    member_id: str | None,
    member_epoch: int,
    topics: Sequence[tuple[str, Sequence[int]]] | None,
    require_stable: bool,
) -> GroupAnswer:
    def refused(error: ErrorCode) -> GroupAnswer:
        # (the partitions asked: before v2 the group's error is reported on each)
        return error, [(name, [FetchedPartition(p) for p in parts]) for name, parts in topics or ()]

    if not group_allowed(ctx, AclOperation.DESCRIBE, group_id):
        return refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)

    def describable(name: str) -> bool:
        return allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name)

    authorized = None if topics is None else [(name, parts) for name, parts in topics if describable(name)]

    def read(shard: GroupCoordinatorShard) -> GroupAnswer:
        error = offsets_group(shard, group_id).validate_offset_fetch(member_id, member_epoch)
        if error not in (ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND):
            return refused(error)
        found = fetch_offsets(offsets_of(shard), group_id, authorized, require_stable, known_group=error is ErrorCode.NONE)
        return ErrorCode.NONE, found

    runtime = groups_runtime(ctx)
    partition = runtime.partition_for(group_id)
    answer: GroupAnswer | None
    if require_stable:  # (Kafka: a write operation, so it waits for the commits before it)
        error, answer = await runtime.write_op(partition, lambda shard: ([], read(shard)))
    else:
        shard, error = runtime.shard_or_error(partition)
        answer = None if shard is None else read(shard)
    if answer is None:
        return refused(ErrorCode.NOT_COORDINATOR if error is ErrorCode.NONE else error)
    if answer[0] is not ErrorCode.NONE or topics is None:
        return answer[0], [(name, parts) for name, parts in answer[1] if describable(name)]
    found = dict(answer[1])
    denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return ErrorCode.NONE, [
        (name, found[name] if name in found else [FetchedPartition(p, error=denied) for p in parts])
        for name, parts in topics
    ]


def register(registry: BrokerRegistry) -> None:
    registry.register(of.API, handle, on_control=False)
