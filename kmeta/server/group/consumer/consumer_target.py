"""The next target assignment of a consumer group (Kafka's ``TargetAssignmentBuilder``).

The group's assignor (the server assignor most of its members ask for, else the broker's
default, Kafka's ``computePreferredServerAssignor``) is given every member's subscribed topic
ids and current target, and the subscribed topics' partition counts. What it returns becomes
records: one ``ConsumerGroupTargetAssignmentMember`` per member whose target changed, then
``ConsumerGroupTargetAssignmentMetadata`` with the new assignment epoch (written last, so a
reader that sees the epoch has every member's target of it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.server.group.assignors import Assignment, MemberSpec, PartitionAssignor
from kmeta.server.group.consumer import consumer_records as rec
from kmeta.server.group.consumer.consumer_group import ConsumerGroup, TopicMeta, member_topic_names
from kmeta.server.group.consumer.consumer_member import ConsumerGroupMember, to_topic_partitions
from kmeta.server.group.consumer.consumer_records import Record


def preferred_assignor(
    group: ConsumerGroup,
    assignors: Mapping[str, PartitionAssignor],
    old: ConsumerGroupMember | None = None,
    new: ConsumerGroupMember | None = None,
) -> PartitionAssignor:
    """The assignor most members name (ties: the broker's order), else the default (first)."""
    votes: Counter[str] = Counter(
        m.server_assignor for m in group.members.values() if m.server_assignor is not None
    )
    if old is not None and old.server_assignor is not None:
        votes[old.server_assignor] -= 1
    if new is not None and new.server_assignor is not None:
        votes[new.server_assignor] += 1
    order = list(assignors)
    ranked = sorted((n for n, c in votes.items() if c > 0 and n in assignors), key=lambda n: (-votes[n], order.index(n)))
    return assignors[ranked[0] if ranked else order[0]]


def target_assignment(
    group: ConsumerGroup,
    epoch: int,
    assignor: PartitionAssignor,
    metadata: Mapping[str, TopicMeta],
    snap: MetadataSnapshot,
    updated: ConsumerGroupMember | None = None,
    replaces: str | None = None,
) -> tuple[list[Record], dict[str, Assignment]]:
    """The records of the target at ``epoch`` and every member's target in it.

    ``updated``: a member as this heartbeat changes it (not yet replayed); ``replaces``: the
    member id a static member takes over (its target goes to ``updated``)."""
    members = dict(group.members)
    if replaces is not None:
        members.pop(replaces, None)
    if updated is not None:
        members[updated.member_id] = updated
    ids = {meta.topic_id: meta.num_partitions for meta in metadata.values()}
    specs: dict[str, MemberSpec] = {}
    for member_id, member in members.items():
        inherits = replaces is not None and updated is not None and member_id == updated.member_id
        names = member_topic_names(member, snap)
        specs[member_id] = MemberSpec(
            subscribed_topic_ids=frozenset(m.topic_id for n, m in metadata.items() if n in names),
            assignment=group.target_of(replaces if inherits and replaces else member_id),
            instance_id=member.instance_id,
            rack_id=member.rack_id,
        )
    result = assignor.assign(specs, ids)
    records: list[Record] = []
    for member_id in sorted(members):
        new_target = result.get(member_id, {})
        old_target = group.target_assignment.get(member_id)
        if old_target is None or old_target != new_target:
            records.append(target_member_record(group.group_id, member_id, new_target))
    records.append(
        (
            rec.encode_key(rec.TARGET_ASSIGNMENT_METADATA, group.group_id),
            rec.encode_value(
                rec.TARGET_ASSIGNMENT_METADATA_VALUE,
                rec.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch),
            ),
        )
    )
    return records, {m: result.get(m, {}) for m in members}


def target_member_record(group_id: str, member_id: str, target: Assignment) -> Record:
    value = rec.ConsumerGroupTargetAssignmentMemberValue(
        topic_partitions=tuple(rec.TopicPartition(t.topic_id, t.partitions) for t in to_topic_partitions(target))
    )
    return (
        rec.encode_key(rec.TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
        rec.encode_value(rec.TARGET_ASSIGNMENT_MEMBER_VALUE, value),
    )
