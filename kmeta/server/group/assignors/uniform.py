"""The server-side uniform assignor (Kafka's ``UniformAssignor``, KIP-848's default).

Balance first, stickiness second, as Kafka's builders:

* Homogeneous (every member subscribes to the same topics; Kafka's
  ``UniformHomogeneousAssignmentBuilder``): each member's quota is ``total // members``, and
  ``total % members`` of them get one more. A member keeps its current partitions up to its
  quota (partitions of topics it no longer subscribes to, or past the quota, are freed), then
  the free partitions fill the members below quota. The extra slots go first to the members
  that already hold more than the minimum (so fewer partitions move; Kafka hands them out in
  iteration order).
* Heterogeneous (members subscribe to different topics; Kafka's
  ``UniformHeterogeneousAssignmentBuilder``): a member keeps the partitions it may still have,
  each free partition goes to the least loaded member subscribed to its topic (the partitions
  with the fewest candidates first), then partitions move from the most to the least loaded
  candidates while that narrows the gap by more than one.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from kmeta.server.group.assignors import Assignment, MemberSpec, freeze

NAME = "uniform"

TopicPartition = tuple[uuid.UUID, int]


class UniformAssignor:
    name = NAME

    def assign(
        self, members: Mapping[str, MemberSpec], partition_counts: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]:
        if not members:
            return {}
        subscriptions = {spec.subscribed_topic_ids for spec in members.values()}
        if len(subscriptions) == 1:
            return _homogeneous(members, partition_counts, next(iter(subscriptions)))
        return _heterogeneous(members, partition_counts)


def _kept(spec: MemberSpec, partition_counts: Mapping[uuid.UUID, int]) -> list[TopicPartition]:
    """The member's current partitions it may keep: subscribed topics, existing partitions."""
    return [
        (t, p)
        for t in sorted(spec.assignment)
        if t in spec.subscribed_topic_ids and t in partition_counts
        for p in sorted(spec.assignment[t])
        if p < partition_counts[t]
    ]


def _homogeneous(
    members: Mapping[str, MemberSpec],
    partition_counts: Mapping[uuid.UUID, int],
    topics: frozenset[uuid.UUID],
) -> dict[str, Assignment]:
    topic_ids = sorted(t for t in topics if t in partition_counts)
    total = sum(partition_counts[t] for t in topic_ids)
    minimum, extra = divmod(total, len(members))
    taken: set[TopicPartition] = set()
    current: dict[str, list[TopicPartition]] = {}
    for member_id in sorted(members):
        mine = [tp for tp in _kept(members[member_id], partition_counts) if tp not in taken]
        taken.update(mine)
        current[member_id] = mine
    # the extra slots go to the members holding the most already (ties: member id)
    by_size = sorted(current, key=lambda m: (-len(current[m]), m))
    quotas = {m: minimum + (1 if i < extra else 0) for i, m in enumerate(by_size)}
    result: dict[str, list[TopicPartition]] = {}
    for member_id in sorted(members):
        keep = current[member_id][: quotas[member_id]]
        for tp in current[member_id][quotas[member_id]:]:
            taken.discard(tp)
        result[member_id] = keep
    free = [(t, p) for t in topic_ids for p in range(partition_counts[t]) if (t, p) not in taken]
    position = 0
    for member_id in sorted(members):
        room = quotas[member_id] - len(result[member_id])
        if room > 0:
            result[member_id].extend(free[position : position + room])
            position += room
    return {m: _to_assignment(tps) for m, tps in result.items()}


def _heterogeneous(
    members: Mapping[str, MemberSpec], partition_counts: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    candidates: dict[uuid.UUID, list[str]] = {}
    for member_id in sorted(members):
        for t in members[member_id].subscribed_topic_ids:
            if t in partition_counts:
                candidates.setdefault(t, []).append(member_id)
    owner: dict[TopicPartition, str] = {}
    held: dict[str, set[TopicPartition]] = {m: set() for m in members}
    for member_id in sorted(members):
        for tp in _kept(members[member_id], partition_counts):
            if tp not in owner:
                owner[tp] = member_id
                held[member_id].add(tp)
    free = sorted(
        ((t, p) for t in candidates for p in range(partition_counts[t]) if (t, p) not in owner),
        key=lambda tp: (len(candidates[tp[0]]), tp[0], tp[1]),
    )
    for tp in free:
        target = min(candidates[tp[0]], key=lambda m: (len(held[m]), m))
        owner[tp] = target
        held[target].add(tp)
    _balance(held, candidates)
    return {m: _to_assignment(tps) for m, tps in held.items()}


def _balance(held: dict[str, set[TopicPartition]], candidates: Mapping[uuid.UUID, list[str]]) -> None:
    """Move partitions from loaded members to lighter candidates while a move narrows the gap
    (each move lowers the sum of squared sizes, so this ends)."""
    moved = True
    while moved:
        moved = False
        for member_id in sorted(held, key=lambda m: (-len(held[m]), m)):
            for tp in sorted(held[member_id]):
                lightest = min(candidates[tp[0]], key=lambda m: (len(held[m]), m))
                if len(held[lightest]) + 1 < len(held[member_id]):
                    held[member_id].discard(tp)
                    held[lightest].add(tp)
                    moved = True


def _to_assignment(partitions: list[TopicPartition] | set[TopicPartition]) -> Assignment:
    grouped: dict[uuid.UUID, set[int]] = {}
    for t, p in partitions:
        grouped.setdefault(t, set()).add(p)
    return freeze(grouped)
