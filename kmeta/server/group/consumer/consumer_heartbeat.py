"""ConsumerGroupHeartbeat's decisions (Kafka's ``GroupMetadataManager.consumerGroupHeartbeat``):
from a request and the group's committed state, the records to write and the answer to give.

Pure: nothing changes here. The coordinator writes the records, the group replays them once
committed, then the answer goes out and the timers the outcome names are set. One heartbeat
of a group is decided at a time (the coordinator holds the group's lock across decide, write,
replay), so each decision sees the state the previous one left.

Per heartbeat, as Kafka: (1) the member is created or updated — a changed subscription bumps
the group epoch, as does a change of the subscribed topics' partition counts (read from the
broker's metadata at every heartbeat, so a partition added or a topic created that a regex
matches is noticed at the next heartbeat even without the metadata hook); (2) a group epoch
past the assignment epoch computes a new target assignment; (3) the member reconciles towards
its target (revoke first, then take partitions once their owners released them).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import consumer_group_heartbeat as cgh
from kmeta.server.group.assignors import Assignment, PartitionAssignor
from kmeta.server.group.consumer import consumer_records as rec
from kmeta.server.group.consumer.consumer_group import ConsumerGroup, TopicMeta
from kmeta.server.group.consumer.consumer_member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    FencedMemberError,
    MemberState,
    is_subset,
    reconcile,
)
from kmeta.server.group.consumer.consumer_records import Record
from kmeta.server.group.consumer.consumer_regex import InvalidRegexError, compile_regex
from kmeta.server.group.consumer.consumer_target import preferred_assignor, target_assignment


class GroupError(Exception):
    """A heartbeat answered with an error (Kafka's ApiException): code and message."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    max_size: int = 2**31 - 1  # group.consumer.max.size
    #: group.consumer.assignors: the server assignors offered, the first the default
    assignors: tuple[str, ...] = ("uniform", "range")


@dataclass
class Outcome:
    """What a decision asks of the coordinator."""

    records: list[Record] = field(default_factory=list)
    response: cgh.ConsumerGroupHeartbeatResponse = field(default_factory=cgh.ConsumerGroupHeartbeatResponse)
    #: (group, member) whose session timer restarts
    session: tuple[str, str] | None = None
    #: (group, member, member epoch, timeout ms): the member must revoke within the timeout
    rebalance: tuple[str, str, int, int] | None = None
    #: (group, member) whose rebalance timer (or every timer, ``cancel_all``) goes
    cancel_rebalance: tuple[str, str] | None = None
    cancel_all: tuple[str, str] | None = None


def new_member_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def validate(request: cgh.ConsumerGroupHeartbeatRequest, assignors: Sequence[str]) -> None:
    """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
    def empty(value: str | None) -> bool:
        return value is not None and not value.strip()

    if empty(request.group_id):
        raise GroupError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    if empty(request.instance_id):
        raise GroupError(ErrorCode.INVALID_REQUEST, "InstanceId can't be empty.")
    if empty(request.rack_id):
        raise GroupError(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
    if request.version >= 1 and not request.member_id.strip():  # (v1: the client makes it, KIP-1082)
        raise GroupError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    epoch = request.member_epoch
    if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if empty(request.member_id):
            raise GroupError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    elif epoch == JOIN_GROUP_MEMBER_EPOCH:
        if request.rebalance_timeout_ms == -1:
            raise GroupError(ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
        if request.topic_partitions is None or request.topic_partitions:
            raise GroupError(ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            # (an empty list, or an empty regex, is a subscription to nothing)
            raise GroupError(
                ErrorCode.INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
            )
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if empty(request.member_id):
            raise GroupError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if request.instance_id is None:
            raise GroupError(ErrorCode.INVALID_REQUEST, "InstanceId can't be null.")
    else:
        raise GroupError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
    if request.subscribed_topic_regex:
        try:
            compile_regex(request.subscribed_topic_regex)
        except InvalidRegexError as exc:
            raise GroupError(ErrorCode.INVALID_REGULAR_EXPRESSION, str(exc)) from None
    if request.server_assignor is not None and request.server_assignor not in assignors:
        raise GroupError(
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {request.server_assignor} is not supported. Supported assignors: "
            f"{', '.join(assignors)}.",
        )


def member_records(group_id: str, member: ConsumerGroupMember) -> tuple[Record, Record]:
    """The member's metadata and current assignment records."""
    return (
        (rec.encode_key(rec.MEMBER_METADATA, group_id, member.member_id),
         rec.encode_value(rec.MEMBER_METADATA_VALUE, member.metadata_value())),
        (rec.encode_key(rec.CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id),
         rec.encode_value(rec.CURRENT_MEMBER_ASSIGNMENT_VALUE, member.assignment_value())),
    )


def epoch_record(group_id: str, epoch: int) -> Record:
    return (rec.encode_key(rec.GROUP_METADATA, group_id),
            rec.encode_value(rec.GROUP_METADATA_VALUE, rec.ConsumerGroupMetadataValue(epoch=epoch)))


def partition_metadata_record(group: ConsumerGroup, metadata: Mapping[str, TopicMeta]) -> Record:
    topics = tuple(rec.TopicMetadata(t_id, name, count) for t_id, name, count in metadata.values())
    return (rec.encode_key(rec.PARTITION_METADATA, group.group_id),
            rec.encode_value(rec.PARTITION_METADATA_VALUE, rec.ConsumerGroupPartitionMetadataValue(topics=topics)))


def removal_records(group_id: str, member_id: str) -> list[Record]:
    """Kafka's ``removeMember``: the tombstones of a member, current assignment first."""
    return [
        (rec.encode_key(rec.CURRENT_MEMBER_ASSIGNMENT, group_id, member_id), None),
        (rec.encode_key(rec.TARGET_ASSIGNMENT_MEMBER, group_id, member_id), None),
        (rec.encode_key(rec.MEMBER_METADATA, group_id, member_id), None),
    ]


def response_assignment(member: ConsumerGroupMember) -> cgh.Assignment:
    return cgh.Assignment(
        topic_partitions=tuple(
            cgh.TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(member.assigned_partitions.items())
        )
    )


@dataclass
class Decision:
    """One heartbeat being decided: the group as committed, and what this heartbeat adds."""

    group: ConsumerGroup
    snap: MetadataSnapshot
    assignors: dict[str, PartitionAssignor]
    out: Outcome = field(default_factory=Outcome)

    def bump_and_assign(
        self, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None, bump: bool,
        replaces: str | None = None,
    ) -> tuple[int, Assignment | None]:
        """Steps (1)'s end and (2): the subscription metadata, the group epoch, the target
        assignment; returns the target epoch and ``new``'s target (None: no new member)."""
        group = self.group
        metadata = group.subscription_metadata_of(group.subscribed_topics(self.snap, old, new), self.snap)
        if metadata != group.subscription_metadata:
            self.out.records.append(partition_metadata_record(group, metadata))
            bump = True
        epoch = group.group_epoch + 1 if bump else group.group_epoch
        if bump:
            self.out.records.append(epoch_record(group.group_id, epoch))
        if epoch > group.assignment_epoch:
            assignor = preferred_assignor(group, self.assignors, old, new)
            records, targets = target_assignment(group, epoch, assignor, metadata, self.snap, new, replaces)
            self.out.records.extend(records)
            return epoch, None if new is None else targets.get(new.member_id, {})
        if new is None:
            return group.assignment_epoch, None
        return group.assignment_epoch, group.target_of(replaces or new.member_id)

    def fence(self, member: ConsumerGroupMember) -> list[Record]:
        """Kafka's ``consumerGroupFenceMember``: the member's tombstones, the subscription
        metadata without it, a group epoch bump (the target follows at the next heartbeat)."""
        self.out.records.extend(removal_records(self.group.group_id, member.member_id))
        group = self.group
        metadata = group.subscription_metadata_of(group.subscribed_topics(self.snap, member, None), self.snap)
        if metadata != group.subscription_metadata:
            self.out.records.append(partition_metadata_record(group, metadata))
        self.out.records.append(epoch_record(group.group_id, group.group_epoch + 1))
        self.out.cancel_all = (group.group_id, member.member_id)
        return self.out.records


def check_epoch(member: ConsumerGroupMember, received: int, owned: Sequence[cgh.TopicPartitions] | None) -> None:
    """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``."""
    if received > member.member_epoch:
        raise GroupError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({received}) than the one known by "
            f"the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )
    if received < member.member_epoch and (
        received != member.previous_member_epoch or not is_subset(owned, member.assigned_partitions)
    ):
        raise GroupError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a smaller member epoch ({received}) than the one known by "
            f"the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )


def check_static_member(
    static: ConsumerGroupMember | None, member_id: str, instance_id: str
) -> ConsumerGroupMember:
    """Kafka's ``throwIfStaticMemberIsUnknown`` and ``throwIfInstanceIdIsFenced``: the member
    that holds ``instance_id`` (``static``) must be ``member_id``."""
    if static is None:
        raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
    if static.member_id != member_id:
        raise GroupError(
            ErrorCode.FENCED_INSTANCE_ID,
            f"The static member {member_id} with instance id {instance_id} is fenced by "
            f"existing member {static.member_id}.",
        )
    return static


def reconcile_member(
    d: Decision, member: ConsumerGroupMember, target_epoch: int, target: Assignment,
    owned: Sequence[cgh.TopicPartitions] | None,
) -> ConsumerGroupMember:
    """Step (3), with the rebalance timer as Kafka sets it."""
    try:
        updated = reconcile(member, target_epoch, target, d.group.partition_epoch, owned)
    except FencedMemberError as exc:
        raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, str(exc)) from None
    group_id = d.group.group_id
    if updated != member:
        d.out.records.append(member_records(group_id, updated)[1])
        if updated.state is MemberState.UNREVOKED_PARTITIONS:
            timeout = updated.rebalance_timeout_ms if updated.rebalance_timeout_ms > 0 else 0
            d.out.rebalance = (group_id, updated.member_id, updated.member_epoch, timeout)
        else:
            d.out.cancel_rebalance = (group_id, updated.member_id)
    return updated


def joined(member: ConsumerGroupMember, request: cgh.ConsumerGroupHeartbeatRequest,
           client_id: str, client_host: str) -> ConsumerGroupMember:
    """The member with what the request changes (a field left null or -1 keeps its value)."""
    return replace(
        member,
        instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
        rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(
            request.rebalance_timeout_ms if request.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms
        ),
        server_assignor=request.server_assignor if request.server_assignor is not None else member.server_assignor,
        subscribed_topic_regex=(
            request.subscribed_topic_regex
            if request.subscribed_topic_regex is not None
            else member.subscribed_topic_regex
        ),
        subscribed_topic_names=(
            tuple(sorted(set(request.subscribed_topic_names)))
            if request.subscribed_topic_names is not None
            else member.subscribed_topic_names
        ),
        client_id=client_id,
        client_host=client_host,
    )
