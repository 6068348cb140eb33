"""A KIP-848 consumer group as its records rebuild it (Kafka's ``ConsumerGroup``).

Everything here changes only in ``replay``: the coordinator computes records from this state,
writes them, and the state follows once they are committed (the runtime's contract), so a new
leader of the partition rebuilds exactly this from the log.

Epochs: the *group epoch* bumps whenever what the assignment depends on changes (a member
joins, leaves or changes its subscription; a subscribed topic's partitions change); the
*assignment epoch* is the group epoch the target assignment was computed at (the group is
ASSIGNING while it lags); each member's epoch reaches the assignment epoch as it reconciles
(the group is RECONCILING until all have).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import NamedTuple

from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.protocol.errors import ErrorCode
from kmeta.server.group.assignors import EMPTY_ASSIGNMENT, Assignment
from kmeta.server.group.consumer import consumer_records as rec
from kmeta.server.group.consumer.consumer_member import (
    ConsumerGroupMember,
    MemberState,
    from_topic_partitions,
)
from kmeta.server.group.consumer.consumer_regex import matching_topics

#: Kafka's ConsumerGroupState names (DescribeGroups, ListGroups, ConsumerGroupDescribe)
EMPTY = "Empty"
ASSIGNING = "Assigning"
RECONCILING = "Reconciling"
STABLE = "Stable"
DEAD = "Dead"


class TopicMeta(NamedTuple):
    """A subscribed topic as the group last saw it (Kafka's subscription metadata)."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int


def member_topic_names(member: ConsumerGroupMember, snap: MetadataSnapshot) -> set[str]:
    """The topics ``member`` subscribes to: by name, and the topics of ``snap`` its regex
    matches."""
    names = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex:
        names |= matching_topics(member.subscribed_topic_regex, snap.topic_ids.keys())
    return names


def _commit_time(commit_timestamp_ms: int) -> int:
    return commit_timestamp_ms


class ConsumerGroup:
    group_type = "consumer"
    protocol_type = "consumer"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        #: instance id -> member id (static members)
        self.static_members: dict[str, str] = {}
        self.target_assignment: dict[str, Assignment] = {}
        self.subscription_metadata: dict[str, TopicMeta] = {}
        #: topic id -> partition -> the epoch of the member that holds it (assigned or revoking)
        self.partition_epochs: dict[uuid.UUID, dict[int, int]] = {}
        #: topic name -> how many members subscribe to it by name
        self.subscribed_topic_names: Counter[str] = Counter()
        #: regex -> how many members subscribe with it
        self.subscribed_regexes: Counter[str] = Counter()

    # -- derived -------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        for member in self.members.values():
            if member.member_epoch != self.assignment_epoch or member.state is not MemberState.STABLE:
                return RECONCILING
        return STABLE

    @property
    def state_name(self) -> str:
        return self.state

    @property
    def generation_id(self) -> int:
        """The group epoch: OffsetCommit from a consumer member carries its member epoch."""
        return self.group_epoch

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_static_member(self, member_id: str) -> bool:
        member = self.members.get(member_id)
        return member is not None and member.instance_id is not None

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        member_id = None if instance_id is None else self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def tombstones(self) -> list[tuple[bytes, bytes | None]]:
        """DeleteGroups' records (Kafka's ``createGroupTombstoneRecords``): every member's
        assignment, target and metadata, the target epoch, the subscription metadata, the
        group epoch last (its tombstone drops the group on replay)."""
        g = self.group_id
        records: list[tuple[bytes, bytes | None]] = []
        records += [(rec.encode_key(rec.CURRENT_MEMBER_ASSIGNMENT, g, m), None) for m in self.members]
        records += [(rec.encode_key(rec.TARGET_ASSIGNMENT_MEMBER, g, m), None) for m in self.members]
        records.append((rec.encode_key(rec.TARGET_ASSIGNMENT_METADATA, g), None))
        records += [(rec.encode_key(rec.MEMBER_METADATA, g, m), None) for m in self.members]
        records.append((rec.encode_key(rec.PARTITION_METADATA, g), None))
        records.append((rec.encode_key(rec.GROUP_METADATA, g), None))
        return records

    # -- the offset APIs' checks (Kafka's ConsumerGroup.validateOffsetCommit and friends) ------
    def validate_offset_commit(
        self, member_id: str, group_instance_id: str | None, member_epoch: int, transactional: bool, api_version: int
    ) -> ErrorCode:
        if member_epoch < 0 and not self.members:
            return ErrorCode.NONE  # the admin client, or a consumer outside the group
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION  # a KIP-848 member commits with v9+
        return ErrorCode.NONE if member_epoch == member.member_epoch else ErrorCode.STALE_MEMBER_EPOCH

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        if member_id is None and member_epoch < 0:
            return ErrorCode.NONE
        member = None if member_id is None else self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE if member_epoch == member.member_epoch else ErrorCode.STALE_MEMBER_EPOCH

    def validate_offset_delete(self) -> ErrorCode:
        return ErrorCode.NONE

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topic_names.get(topic, 0) > 0 or topic in self.subscription_metadata

    def offset_expiration_base(self) -> Callable[[int], int] | None:
        """Offsets of a consumer group expire counting from their commit (Kafka's condition)."""
        return _commit_time

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get(topic_id, {}).get(partition, -1)

    def target_of(self, member_id: str) -> Assignment:
        return self.target_assignment.get(member_id, EMPTY_ASSIGNMENT)

    def subscribed_topics(
        self, snap: MetadataSnapshot, old: ConsumerGroupMember | None = None, new: ConsumerGroupMember | None = None
    ) -> set[str]:
        """Every topic name some member subscribes to (by name, or by a regex matching a topic
        of ``snap``), with member ``old`` replaced by ``new`` (Kafka's
        ``computeSubscribedTopicNames``)."""
        names = Counter(self.subscribed_topic_names)
        regexes = Counter(self.subscribed_regexes)
        if old is not None:
            names.subtract(old.subscribed_topic_names)
            if old.subscribed_topic_regex:
                regexes[old.subscribed_topic_regex] -= 1
        if new is not None:
            names.update(new.subscribed_topic_names)
            if new.subscribed_topic_regex:
                regexes[new.subscribed_topic_regex] += 1
        topics = {name for name, count in names.items() if count > 0}
        for regex, count in regexes.items():
            if count > 0:
                topics |= matching_topics(regex, snap.topic_ids.keys())
        return topics

    @staticmethod
    def subscription_metadata_of(topics: Iterable[str], snap: MetadataSnapshot) -> dict[str, TopicMeta]:
        """The subscribed topics that exist in ``snap``, with their ids and partition counts."""
        result: dict[str, TopicMeta] = {}
        for name in sorted(topics):
            topic_id = snap.topic_id(name)
            count = snap.partition_count(name)
            if topic_id is not None and count > 0:
                result[name] = TopicMeta(topic_id, name, count)
        return result

    # -- replay --------------------------------------------------------------------------------
    def replay(self, version: int, member_id: str | None, value: bytes | None) -> None:
        """One committed record of this group (``version``: its key version)."""
        body = None if value is None else value[2:]
        value_version = -1 if value is None else rec.value_version(value)
        if version == rec.GROUP_METADATA:
            if body is not None:
                self.group_epoch = rec.GROUP_METADATA_VALUE.decode(body, value_version).epoch
        elif version == rec.PARTITION_METADATA:
            topics = () if body is None else rec.PARTITION_METADATA_VALUE.decode(body, value_version).topics
            self.subscription_metadata = {
                t.topic_name: TopicMeta(t.topic_id, t.topic_name, t.num_partitions) for t in topics
            }
        elif version == rec.TARGET_ASSIGNMENT_METADATA:
            if body is not None:
                decoded = rec.TARGET_ASSIGNMENT_METADATA_VALUE.decode(body, value_version)
                self.assignment_epoch = decoded.assignment_epoch
        elif member_id is not None:
            self._replay_member(version, member_id, body, value_version)

    def _replay_member(self, version: int, member_id: str, body: bytes | None, value_version: int) -> None:
        if version == rec.MEMBER_METADATA:
            if body is None:
                self._remove_member(member_id)
                return
            metadata = rec.MEMBER_METADATA_VALUE.decode(body, value_version)
            old = self.members.get(member_id)
            self._put_member(old, (old or ConsumerGroupMember(member_id)).with_metadata(metadata))
        elif version == rec.TARGET_ASSIGNMENT_MEMBER:
            if body is None:
                self.target_assignment.pop(member_id, None)
            else:
                value = rec.TARGET_ASSIGNMENT_MEMBER_VALUE.decode(body, value_version)
                self.target_assignment[member_id] = from_topic_partitions(value.topic_partitions)
        elif version == rec.CURRENT_MEMBER_ASSIGNMENT:
            old = self.members.get(member_id)
            if body is None:
                if old is not None:  # Kafka resets the member; its metadata tombstone follows
                    self._put_member(old, replace(old, member_epoch=-1, previous_member_epoch=-1, state=MemberState.STABLE, assigned_partitions=EMPTY_ASSIGNMENT, partitions_pending_revocation=EMPTY_ASSIGNMENT))
                return
            current = rec.CURRENT_MEMBER_ASSIGNMENT_VALUE.decode(body, value_version)
            self._put_member(old, (old or ConsumerGroupMember(member_id)).with_assignment(current))

    def _put_member(self, old: ConsumerGroupMember | None, new: ConsumerGroupMember) -> None:
        if old is not None:
            self._forget(old)
        self.members[new.member_id] = new
        self.subscribed_topic_names.update(new.subscribed_topic_names)
        if new.subscribed_topic_regex:
            self.subscribed_regexes[new.subscribed_topic_regex] += 1
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id
        self._set_epochs(new.assigned_partitions, new.member_epoch)
        self._set_epochs(new.partitions_pending_revocation, new.member_epoch)

    def _remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is not None:
            self._forget(old)

    def _forget(self, old: ConsumerGroupMember) -> None:
        self.subscribed_topic_names.subtract(old.subscribed_topic_names)
        self.subscribed_topic_names = +self.subscribed_topic_names
        if old.subscribed_topic_regex:
            self.subscribed_regexes[old.subscribed_topic_regex] -= 1
            self.subscribed_regexes = +self.subscribed_regexes
        if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
            del self.static_members[old.instance_id]
        self._set_epochs(old.assigned_partitions, None)
        self._set_epochs(old.partitions_pending_revocation, None)

    def _set_epochs(self, assignment: Assignment, epoch: int | None) -> None:
        for topic_id, partitions in assignment.items():
            epochs = self.partition_epochs.setdefault(topic_id, {})
            for p in partitions:
                if epoch is None:
                    epochs.pop(p, None)
                else:
                    epochs[p] = epoch
            if not epochs:
                del self.partition_epochs[topic_id]
