"""What the four offset handlers share (OffsetCommit, TxnOffsetCommit, OffsetDelete,
OffsetFetch): the group's shard on this broker, the group's checks, Kafka's per-topic
authorization and existence filter (``KafkaApis.handleOffsetCommitRequest``), and the write.

As Kafka's ``scheduleWriteOperation``, a commit's group check and its records are one write
operation of the coordinator runtime (:meth:`~kmeta.server.coordinator.runtime
.CoordinatorRuntime.write_op`): it runs once every earlier write to the partition is replayed,
so it validates against their effects (a rebalance written just before).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed
from kmeta.protocol.errors import ErrorCode
from kmeta.server.coordinator.runtime import CoordinatorRuntime
from kmeta.server.group.classic.classic import GroupState
from kmeta.server.group.offsets.offset_records import Record
from kmeta.server.group.offsets.offsets_groups import OffsetsGroup, offsets_group
from kmeta.server.group.offsets.offsets_requests import (
    DEFAULT_RETENTION_TIME,
    CommitPartition,
    commit_offset_records,
)
from kmeta.server.group.shard import GroupCoordinatorShard
from kmeta.server.state import BrokerContext, BrokerState

#: offsets.commit.timeout.ms (Kafka's default): how long a commit waits for its replicas
OFFSET_COMMIT_TIMEOUT_S = 5.0


Partition = TypeVar("Partition")


@dataclass(slots=True)
class TopicFilter(Generic[Partition]):
    """A request's topics split as Kafka's handlers split them: the partitions that go to the
    coordinator (``accepted``) and the answers already decided (``errors``)."""

    accepted: list[tuple[str, list[Partition]]]
    errors: dict[tuple[str, int], ErrorCode]


def filter_topics(
    ctx: BrokerContext,
    topics: Iterable[tuple[str, Sequence[Partition]]],
    index: Callable[[Partition], int],
    operation: AclOperation = AclOperation.READ,
) -> TopicFilter[Partition]:
    """Topic ``operation`` (else TOPIC_AUTHORIZATION_FAILED for all its partitions), then the
    topic and each partition known to the metadata (else UNKNOWN_TOPIC_OR_PARTITION)."""
    snap = ctx.state.cache.snapshot
    result: TopicFilter[Partition] = TopicFilter([], {})
    for name, partitions in topics:
        if not allowed(ctx, operation, ResourceType.TOPIC, name):
            result.errors.update(((name, index(p)), ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in partitions)
            continue
        count = snap.partition_count(name)
        valid = []
        for p in partitions:
            if 0 <= index(p) < count and snap.partition(name, index(p)) is not None:
                valid.append(p)
            else:
                result.errors[(name, index(p))] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if valid:
            result.accepted.append((name, valid))
    return result


def answers_in_order(
    topics: Iterable[tuple[str, Sequence[Partition]]],
    index: Callable[[Partition], int],
    errors: dict[tuple[str, int], ErrorCode],
) -> list[tuple[str, list[tuple[int, ErrorCode]]]]:
    """Each requested partition with its error, topics and partitions in the request's order."""
    return [(name, [(index(p), errors.get((name, index(p)), ErrorCode.NONE)) for p in parts]) for name, parts in topics]


def group_allowed(ctx: BrokerContext, operation: AclOperation, group_id: str) -> bool:
    return allowed(ctx, operation, ResourceType.GROUP, group_id)


def groups_runtime(ctx: BrokerContext) -> CoordinatorRuntime[GroupCoordinatorShard]:
    return groups_runtime_of(ctx.state)


def groups_runtime_of(state: BrokerState) -> CoordinatorRuntime[GroupCoordinatorShard]:
    runtime: CoordinatorRuntime[GroupCoordinatorShard] = state.coordinators.groups
    return runtime


async def commit_offsets(
    ctx: BrokerContext,
    group_id: str,
    accepted: list[tuple[str, list[CommitPartition]]],
    validate: Callable[[OffsetsGroup], ErrorCode],
    *,
    retention_time_ms: int = DEFAULT_RETENTION_TIME,
    member_id: str = "",
    producer_id: int = -1,
    producer_epoch: int = -1,
) -> dict[tuple[str, int], ErrorCode]:
    """OffsetCommit's and TxnOffsetCommit's common path: the shard, the group's check
    (``validate``), the records, the write; an error of any of these answers every partition
    (Kafka's ``getErrorResponse``), else each partition its own (OFFSET_METADATA_TOO_LARGE)."""
    runtime = groups_runtime(ctx)
    every = [(t, p.partition) for t, parts in accepted for p in parts]
    max_bytes = ctx.state.config.offset_metadata_max_bytes

    def op(shard: GroupCoordinatorShard) -> tuple[list[Record], dict[tuple[str, int], ErrorCode]]:
        error = validate(offsets_group(shard, group_id))
        if error is not ErrorCode.NONE:
            return [], dict.fromkeys(every, error)
        if producer_id < 0 and member_id:
            keep_session(shard, group_id, member_id)
        errors, records = commit_offset_records(
            group_id, accepted, now_ms(), retention_time_ms=retention_time_ms, metadata_max_bytes=max_bytes
        )
        return records, errors

    error, errors = await runtime.write_op(
        runtime.partition_for(group_id), op, producer_id=producer_id, producer_epoch=producer_epoch,
        transactional=producer_id >= 0, timeout_s=OFFSET_COMMIT_TIMEOUT_S,
    )  # fmt: skip
    if errors is None or error is not ErrorCode.NONE:
        return dict.fromkeys(every, error)
    return errors


def keep_session(shard: GroupCoordinatorShard, group_id: str, member_id: str) -> None:
    """A classic member's commit counts as a heartbeat while its group is Stable or
    PreparingRebalance (Kafka's ``rescheduleClassicGroupMemberHeartbeat`` on commit)."""
    group = shard.groups.classic_group(group_id)
    if group is None or group.state not in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
        return
    member = group.members.get(member_id)
    if member is not None:
        shard.groups.rebalancer.schedule_heartbeat(group, member_id, member.session_timeout_ms)


def now_ms() -> int:
    return int(time.time() * 1000)
