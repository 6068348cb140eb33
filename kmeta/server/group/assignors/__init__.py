"""Server-side partition assignors for KIP-848 consumer groups (Kafka's
``ConsumerGroupPartitionAssignor``): given every member's subscription and current target
assignment and the subscribed topics' partition counts, each returns the next target
assignment. Pure functions of their input: no I/O, no clock, deterministic (members and topics
are visited in sorted order), so every replica of a coordinator computes the same thing.

* ``uniform`` (the default, Kafka's ``UniformAssignor``): balanced first (member sizes differ
  by at most one when everyone subscribes to the same topics), sticky second.
* ``range`` (Kafka's server ``RangeAssignor``): contiguous ranges per topic, co-partitioned when
  members subscribe to the same topics with the same partition counts.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

#: a member's partitions: topic id -> partition numbers
Assignment = Mapping[uuid.UUID, frozenset[int]]

EMPTY_ASSIGNMENT: Assignment = {}


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What an assignor knows of one member (Kafka's ``MemberSubscriptionAndAssignment``)."""

    subscribed_topic_ids: frozenset[uuid.UUID]
    #: the member's current target assignment (the assignor keeps what it can of it)
    assignment: Assignment = field(default_factory=dict)
    instance_id: str | None = None
    rack_id: str | None = None


class PartitionAssignorError(Exception):
    """The assignor could not compute an assignment (Kafka's PartitionAssignorException)."""


class PartitionAssignor(Protocol):
    @property
    def name(self) -> str: ...

    def assign(
        self, members: Mapping[str, MemberSpec], partition_counts: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]:
        """The new target assignment of every member (``partition_counts``: the subscribed
        topics that exist, by id; a topic missing from it is not assigned)."""
        ...


def freeze(assignment: Mapping[uuid.UUID, set[int] | frozenset[int]]) -> Assignment:
    """An assignment without empty topics, with frozen partition sets."""
    return {t: frozenset(ps) for t, ps in assignment.items() if ps}


#: Kafka's assignor class names (group.consumer.assignors) -> kmeta's names
CLASS_NAMES = {"UniformAssignor": "uniform", "RangeAssignor": "range"}


def assignors(names: tuple[str, ...] = ("uniform", "range")) -> dict[str, PartitionAssignor]:
    """The assignors a broker offers (group.consumer.assignors; Kafka's default: uniform,
    range), in that order, the first being the default."""
    from kmeta.server.group.assignors.range import RangeAssignor
    from kmeta.server.group.assignors.uniform import UniformAssignor

    known: dict[str, PartitionAssignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
    return {CLASS_NAMES.get(n, n): known[CLASS_NAMES.get(n, n)] for n in names}
