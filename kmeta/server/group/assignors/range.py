"""The server-side range assignor (Kafka's ``RangeAssignor``, KIP-848).

Per topic, the members subscribed to it are ordered (static members first by instance id, then
the others by member id) and take contiguous ranges: ``partitions // members`` each, the first
``partitions % members`` one more. The same order is used for every topic, so members that
subscribe to the same co-partitioned topics get the same partition numbers of each (the point
of range: joins across topics). Not sticky beyond that order, as Kafka's; static members keep
their ranges across restarts because their instance ids order them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from kmeta.server.group.assignors import Assignment, MemberSpec

NAME = "range"


def _order(item: tuple[str, MemberSpec]) -> tuple[int, str]:
    member_id, spec = item
    if spec.instance_id is not None:
        return (0, spec.instance_id)
    return (1, member_id)


class RangeAssignor:
    name = NAME

    def assign(
        self, members: Mapping[str, MemberSpec], partition_counts: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]:
        ordered = [member_id for member_id, _ in sorted(members.items(), key=_order)]
        result: dict[str, dict[uuid.UUID, frozenset[int]]] = {m: {} for m in ordered}
        for topic_id in sorted(partition_counts):
            subscribers = [m for m in ordered if topic_id in members[m].subscribed_topic_ids]
            if not subscribers:
                continue
            count = partition_counts[topic_id]
            quota, extra = divmod(count, len(subscribers))
            start = 0
            for index, member_id in enumerate(subscribers):
                end = min(count, start + quota + (1 if index < extra else 0))
                if start < end:
                    result[member_id][topic_id] = frozenset(range(start, end))
                start = end
        return dict(result.items())
