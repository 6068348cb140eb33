"""A consumer group as ConsumerGroupDescribe answers it (Kafka's ``ConsumerGroup.asDescribedGroup``).

Apart from :class:`~kmeta.server.group.consumer.consumer_manager.ConsumerGroupManager`, which finds the
group (and answers GROUP_ID_NOT_FOUND), because this is a read of committed state with no part
in the heartbeat's decisions: it only names each member's current and target partitions.
"""

from __future__ import annotations

from collections.abc import Mapping

from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.protocol.messages import consumer_group_describe as cgd
from kmeta.server.group.assignors import Assignment, PartitionAssignor
from kmeta.server.group.consumer.consumer_group import ConsumerGroup
from kmeta.server.group.consumer.consumer_target import preferred_assignor


def described_group(
    group: ConsumerGroup, snap: MetadataSnapshot, assignors: Mapping[str, PartitionAssignor]
) -> cgd.DescribedGroup:
    """The group with each member's epoch, client, subscription, and current and target
    assignment by topic id and name (a topic known to neither the group's subscription
    metadata nor ``snap`` is left out: it was deleted)."""
    names = {meta.topic_id: name for name, meta in group.subscription_metadata.items()}
    names.update(
        {topic_id: name for name, topic_id in snap.topic_ids.items() if topic_id not in names}
    )

    def assignment(a: Assignment) -> cgd.Assignment:
        return cgd.Assignment(
            topic_partitions=tuple(
                cgd.TopicPartitions(t, names[t], tuple(sorted(ps)))
                for t, ps in sorted(a.items())
                if t in names
            )
        )

    return cgd.DescribedGroup(
        group_id=group.group_id,
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=preferred_assignor(group, assignors).name,
        members=tuple(
            cgd.Member(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=assignment(m.assigned_partitions),
                target_assignment=assignment(group.target_of(m.member_id)),
            )
            for m in group.members.values()
        ),
    )
