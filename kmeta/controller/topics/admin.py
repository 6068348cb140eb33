"""Validation of CreateTopics, DeleteTopics and CreatePartitions, with Kafka's error codes.

Pure functions over the cluster state: they return per-topic errors and, for valid topics, the
replica assignment to apply. The controller applies the plan (or not, for validate_only).

Kafka's rules (ZooKeeper-mode AdminManager / AdminZkClient, 3.x):
* names: 1-249 chars of [a-zA-Z0-9._-], not "." or ".." -> INVALID_TOPIC_EXCEPTION; a name
  that collides with an existing one once '.' and '_' are equated -> INVALID_TOPIC_EXCEPTION
* a name twice in one request -> INVALID_REQUEST for each of its entries
* existing topic -> TOPIC_ALREADY_EXISTS ("... is marked for deletion." while being deleted)
* num_partitions -1 = broker default; 0 or < -1 -> INVALID_PARTITIONS
* replication_factor -1 = broker default; 0 or < -1 -> INVALID_REPLICATION_FACTOR; larger than
  the number of live brokers -> INVALID_REPLICATION_FACTOR
* assignments together with num_partitions/replication_factor -> INVALID_REQUEST; assignments
  must number partitions 0..n-1, have the same non-zero size, no duplicate and no unknown
  broker -> INVALID_REPLICA_ASSIGNMENT. ZooKeeper-mode Kafka does not check the brokers of a
  new topic's assignment, so CreateTopics uses the messages of Kafka's (KRaft) controller,
  which does; CreatePartitions keeps AdminZkClient's, plus its check that added partitions
  have the topic's replication factor.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from kmeta.controller.model import ControllerContext
from kmeta.controller.topics.assignment import AssignmentError, assign_replicas
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_partitions as cp
from kmeta.protocol.messages import create_topics as ct

H = TypeVar("H", bound=Hashable)


class TopicEntry(Protocol):
    """An entry of CreateTopics or CreatePartitions, as planning reads its name."""

    @property
    def name(self) -> str: ...


Entry = TypeVar("Entry", bound=TopicEntry)

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


@dataclass(slots=True)
class TopicPlan:
    name: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    assignment: dict[int, list[int]] = field(default_factory=dict)

    def fail(self, error: ErrorCode, message: str) -> TopicPlan:
        self.error = error
        self.message = message
        return self


def validate_topic_name(name: str) -> str | None:
    """Why ``name`` is illegal, or None."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}"
    if not _LEGAL.match(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


def _collides(name: str, state: ControllerContext) -> str | None:
    if "." not in name and "_" not in name:
        return None
    norm = name.replace(".", "_")
    for other in state.topics:
        if other != name and other.replace(".", "_") == norm:
            return other
    return None


def duplicates(names: Sequence[H]) -> set[H]:
    return {n for n, c in Counter(names).items() if c > 1}


def _live_racks(state: ControllerContext) -> dict[int, str | None]:
    return {b.broker_id: b.rack for b in state.brokers.values() if b.alive}


def _check_manual_assignment(
    plan: TopicPlan, assignments: Sequence[ct.CreatableReplicaAssignment], state: ControllerContext
) -> dict[int, list[int]] | None:
    """CreateTopics' explicit assignments, checked as Kafka's controller checks them
    (ReplicationControlManager.createTopic / validateManualPartitionAssignment): per entry in
    request order, the partition index once, replicas non-empty, registered, each broker once,
    as many as the entries before, at least one unfenced; then indexes 0..n-1."""
    bad = ErrorCode.INVALID_REPLICA_ASSIGNMENT
    out: dict[int, list[int]] = {}
    rf: int | None = None
    for a in assignments:
        if a.partition_index in out:
            plan.fail(
                bad,
                f"Found multiple manual partition assignments for partition {a.partition_index}",
            )
            return None
        replicas = list(a.broker_ids)
        if not replicas:
            plan.fail(bad, "The manual partition assignment includes an empty replica list.")
            return None
        previous = None
        for b in sorted(replicas):
            if b not in state.brokers:
                plan.fail(
                    bad,
                    f"The manual partition assignment includes broker {b}, but no such broker "
                    "is registered.",
                )
                return None
            if b == previous:
                plan.fail(
                    bad, f"The manual partition assignment includes the broker {b} more than once."
                )
                return None
            previous = b
        if rf is not None and len(replicas) != rf:
            plan.fail(
                bad,
                f"The manual partition assignment includes a partition with {len(replicas)} "
                "replica(s), but this is not consistent with previous partitions, which have "
                f"{rf} replica(s).",
            )
            return None
        rf = len(replicas)
        if not any(state.is_alive(b) for b in replicas):
            plan.fail(
                bad,
                "All brokers specified in the manual partition assignment for partition "
                f"{a.partition_index} are fenced or in controlled shutdown.",
            )
            return None
        out[a.partition_index] = replicas
    if sorted(out) != list(range(len(out))):
        plan.fail(bad, "partitions should be a consecutive 0-based integer sequence")
        return None
    return out


def _check_added_assignment(
    plan: TopicPlan, assignment: dict[int, list[int]], state: ControllerContext, rf: int
) -> bool:
    """CreatePartitions' explicit assignments (AdminZkClient.validateReplicaAssignment): each
    non-empty, no broker twice, only registered brokers; then every one of the topic's RF."""
    bad = ErrorCode.INVALID_REPLICA_ASSIGNMENT
    for p, replicas in assignment.items():
        if not replicas:
            plan.fail(bad, f"Cannot have replication factor of 0 for partition id {p}.")
            return False
        if len(set(replicas)) != len(replicas):
            plan.fail(
                bad,
                f"Duplicate brokers not allowed in replica assignment: "
                f"{', '.join(map(str, replicas))} for partition id {p}.",
            )
            return False
        unknown = sorted({b for b in replicas if b not in state.brokers})
        if unknown:
            plan.fail(
                bad, f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}."
            )
            return False
    wrong = sorted((p, len(r)) for p, r in assignment.items() if len(r) != rf)
    if wrong:
        plan.fail(
            bad,
            f"Inconsistent replication factor between partitions, partition 0 has {rf} while "
            f"partitions [{', '.join(str(p) for p, _ in wrong)}] have replication factors "
            f"[{', '.join(str(n) for _, n in wrong)}], respectively.",
        )
        return False
    return True


def _unique_entries(
    topics: Sequence[Entry], plans: list[TopicPlan], duplicate_message: str
) -> Iterator[tuple[Entry, TopicPlan]]:
    """Append one plan per entry to ``plans``; entries naming a topic twice fail with
    INVALID_REQUEST (Kafka's per-API message, ``{}`` = the name); yield the others."""
    dup = duplicates([t.name for t in topics])
    for t in topics:
        plan = TopicPlan(t.name)
        plans.append(plan)
        if t.name in dup:
            plan.fail(ErrorCode.INVALID_REQUEST, duplicate_message.format(t.name))
        else:
            yield t, plan


def plan_create_topics(
    topics: Sequence[ct.CreatableTopic],
    state: ControllerContext,
    *,
    default_partitions: int,
    default_replication_factor: int,
    max_partitions: int,
) -> list[TopicPlan]:
    """One plan per CreatableTopic entry, in request order."""
    plans: list[TopicPlan] = []
    for t, plan in _unique_entries(
        topics, plans, "Create topics request contains multiple entries for topic {}."
    ):
        reason = validate_topic_name(t.name)
        if reason is not None:
            plan.fail(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
            continue
        if t.name in state.deleting:  # until every replica stopped (Kafka's wording)
            plan.fail(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' is marked for deletion.")
            continue
        if t.name in state.topics:
            plan.fail(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
            continue
        other = _collides(t.name, state)
        if other is not None:
            plan.fail(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{t.name}' collides with existing topic: {other}",
            )
            continue
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                plan.fail(
                    ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
                continue
            manual = _check_manual_assignment(plan, t.assignments, state)
            if manual is not None:
                plan.assignment = manual
            continue
        n = default_partitions if t.num_partitions == -1 else t.num_partitions
        rf = default_replication_factor if t.replication_factor == -1 else t.replication_factor
        if n <= 0:
            plan.fail(
                ErrorCode.INVALID_PARTITIONS,
                "Number of partitions was set to an invalid non-positive value.",
            )
            continue
        if n > max_partitions:
            plan.fail(
                ErrorCode.INVALID_PARTITIONS,
                f"Number of partitions {n} is above the limit {max_partitions}.",
            )
            continue
        if rf <= 0:
            plan.fail(
                ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
            )
            continue
        live = _live_racks(state)
        if rf > len(live):
            plan.fail(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {rf} larger than available brokers: {len(live)}.",
            )
            continue
        try:
            plan.assignment = assign_replicas(live, n, rf)
        except AssignmentError as exc:
            plan.fail(ErrorCode.INVALID_REPLICATION_FACTOR, str(exc))
    return plans


def plan_create_partitions(
    topics: Sequence[cp.CreatePartitionsTopic], state: ControllerContext, *, max_partitions: int
) -> list[TopicPlan]:
    """One plan per CreatePartitionsTopic entry; ``assignment`` holds only the new partitions."""
    plans: list[TopicPlan] = []
    for t, plan in _unique_entries(topics, plans, "Duplicate topic in request."):
        info = state.topics.get(t.name)
        if info is None or t.name in state.deleting:
            plan.fail(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{t.name}' does not exist.")
            continue
        current = len(info.partitions)
        if t.count < current:
            plan.fail(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {current} partitions, which is higher than the requested {t.count}.",
            )
            continue
        if t.count == current:
            plan.fail(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
            continue
        if t.count > max_partitions:
            plan.fail(
                ErrorCode.INVALID_PARTITIONS,
                f"Number of partitions {t.count} is above the limit {max_partitions}.",
            )
            continue
        added = t.count - current
        first = info.partitions[0] if 0 in info.partitions else next(iter(info.partitions.values()))
        rf = len(first.replicas)
        if t.assignments is not None:
            if len(t.assignments) != added:
                plan.fail(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Increasing the number of partitions by {added} but {len(t.assignments)} "
                    "assignments provided.",
                )
                continue
            assignment = {current + i: list(a.broker_ids) for i, a in enumerate(t.assignments)}
            if _check_added_assignment(plan, assignment, state, rf):
                plan.assignment = assignment
            continue
        live = _live_racks(state)
        if rf > len(live):
            plan.fail(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {rf} larger than available brokers: {len(live)}.",
            )
            continue
        ids = sorted(live)
        start = ids.index(first.replicas[0]) if first.replicas[0] in ids else -1
        plan.assignment = assign_replicas(
            live, added, rf, fixed_start_index=start, start_partition=current
        )
    return plans
