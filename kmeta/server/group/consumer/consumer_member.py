"""A KIP-848 consumer group member and its reconciliation (Kafka's ``ConsumerGroupMember``,
``MemberState`` and ``CurrentAssignmentBuilder``).

A member moves towards the group's target assignment one epoch at a time:

* it first gives up (revokes) what the target no longer gives it: it stays at its epoch in
  ``UNREVOKED_PARTITIONS`` until a heartbeat's owned partitions no longer list them;
* then it takes the target epoch and the target's new partitions that nobody else still holds;
  a partition another member has not revoked yet is *unreleased*: the member waits for it in
  ``UNRELEASED_PARTITIONS`` and gets it on a later heartbeat, once its owner let go. So no
  partition ever has two owners.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from kmeta.server.group.assignors import EMPTY_ASSIGNMENT, Assignment, freeze
from kmeta.server.group.consumer.consumer_records import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    TopicPartitions,
)

#: Kafka's epochs with a meaning in a heartbeat request
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's ``MemberState`` (its byte goes in the current-assignment record)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class FencedMemberError(Exception):
    """The member must drop its partitions and rejoin (FENCED_MEMBER_EPOCH)."""


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)

    def with_epoch(self, epoch: int) -> ConsumerGroupMember:
        """Kafka's ``updateMemberEpoch``: the current epoch becomes the previous one."""
        return replace(self, previous_member_epoch=self.member_epoch, member_epoch=epoch)

    def subscription(self) -> tuple[tuple[str, ...], str | None]:
        return self.subscribed_topic_names, self.subscribed_topic_regex

    # -- records -------------------------------------------------------------------------------
    def metadata_value(self) -> ConsumerGroupMemberMetadataValue:
        return ConsumerGroupMemberMetadataValue(
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=self.subscribed_topic_names,
            subscribed_topic_regex=self.subscribed_topic_regex,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
        )

    def assignment_value(self) -> ConsumerGroupCurrentMemberAssignmentValue:
        return ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=self.member_epoch,
            previous_member_epoch=self.previous_member_epoch,
            state=int(self.state),
            assigned_partitions=to_topic_partitions(self.assigned_partitions),
            partitions_pending_revocation=to_topic_partitions(self.partitions_pending_revocation),
        )

    def with_metadata(self, value: ConsumerGroupMemberMetadataValue) -> ConsumerGroupMember:
        return replace(
            self,
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=tuple(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor,
        )

    def with_assignment(self, value: ConsumerGroupCurrentMemberAssignmentValue) -> ConsumerGroupMember:
        state = value.state if value.state in MemberState._value2member_map_ else MemberState.UNKNOWN
        return replace(
            self,
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=MemberState(state),
            assigned_partitions=from_topic_partitions(value.assigned_partitions),
            partitions_pending_revocation=from_topic_partitions(value.partitions_pending_revocation),
        )


def to_topic_partitions(assignment: Assignment) -> tuple[TopicPartitions, ...]:
    return tuple(TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(assignment.items()) if ps)


def from_topic_partitions(topics: Sequence[tuple[uuid.UUID, Sequence[int]]] | None) -> Assignment:
    grouped: dict[uuid.UUID, set[int]] = {}
    for topic_id, partitions in topics or ():
        grouped.setdefault(topic_id, set()).update(partitions)
    return freeze(grouped)


def is_subset(owned: Sequence[tuple[uuid.UUID, Sequence[int]]] | None, assignment: Assignment) -> bool:
    """Whether every owned partition is in ``assignment`` (None: the member did not say)."""
    if owned is None:
        return False
    return all(p in assignment.get(t, ()) for t, ps in owned for p in ps)


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: Sequence[tuple[uuid.UUID, Sequence[int]]] | None,
) -> ConsumerGroupMember:
    """The member's next state towards ``target`` (Kafka's ``CurrentAssignmentBuilder.build``).

    ``partition_epoch(topic, partition)`` is the epoch of the member holding that partition
    (assigned or pending revocation), -1 when nobody does; ``owned`` is what the member's
    heartbeat says it holds (None when it did not say: nothing counts as revoked).
    """
    step = _Step(member, target_epoch, target, partition_epoch, owned)
    if member.state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return step.next(member.member_epoch)
        return member
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if step.owns_any(member.partitions_pending_revocation):
            return member
        return step.next(member.member_epoch + 1)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return step.next(member.member_epoch)
    # UNKNOWN: a state a newer coordinator wrote; start the member over from nothing
    if owned is None or any(ps for _, ps in owned):
        raise FencedMemberError(
            "The consumer group member is in a unknown state. The member must abandon all its "
            "partitions and rejoin."
        )
    return step.next(target_epoch)


@dataclass(frozen=True, slots=True)
class _Step:
    member: ConsumerGroupMember
    target_epoch: int
    target: Assignment
    partition_epoch: Callable[[uuid.UUID, int], int]
    owned: Sequence[tuple[uuid.UUID, Sequence[int]]] | None

    def owns_any(self, partitions: Mapping[uuid.UUID, frozenset[int]]) -> bool:
        if self.owned is None:
            return True
        return any(p in partitions.get(t, ()) for t, ps in self.owned for p in ps)

    def next(self, epoch: int) -> ConsumerGroupMember:
        current = self.member.assigned_partitions
        kept: dict[uuid.UUID, set[int]] = {}
        revoking: dict[uuid.UUID, set[int]] = {}
        adding: dict[uuid.UUID, set[int]] = {}
        unreleased = False
        for topic_id in set(self.target) | set(current):
            target = self.target.get(topic_id, frozenset())
            mine = current.get(topic_id, frozenset())
            kept[topic_id] = set(mine & target)
            revoking[topic_id] = set(mine - target)
            wanted = target - mine
            free = {p for p in wanted if self.partition_epoch(topic_id, p) == -1}
            unreleased = unreleased or len(free) < len(wanted)
            adding[topic_id] = free
        pending = freeze(revoking)
        if pending and self.owns_any(pending):
            # the member keeps its epoch until it has given these up
            return replace(
                self.member.with_epoch(epoch),
                state=MemberState.UNREVOKED_PARTITIONS,
                assigned_partitions=freeze(kept),
                partitions_pending_revocation=pending,
            )
        for topic_id, partitions in adding.items():
            kept[topic_id] |= partitions
        return replace(
            self.member.with_epoch(self.target_epoch),
            state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
            assigned_partitions=freeze(kept),
            partitions_pending_revocation=EMPTY_ASSIGNMENT,
        )
