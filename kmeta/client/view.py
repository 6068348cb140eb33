"""Plain-data views of a ``Cluster`` for tools: a JSON-ready dict and the changes between two.

Used by ``kmeta metadata`` (a ``kcat -L`` style listing) and ``kmeta watch`` (every change as
it arrives); kept here, free of printing, so they are tested without a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kmeta.client.cluster import Cluster, PartitionInfo
from kmeta.protocol.errors import ErrorCode


def error_name(code: int) -> str | None:
    if code == 0:
        return None
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"


def partition_to_dict(p: PartitionInfo) -> dict[str, Any]:
    return {
        "partition": p.partition,
        "leader": p.leader_id,
        "leader_epoch": p.leader_epoch,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "offline": list(p.offline_replicas),
        "error": error_name(p.error_code),
    }


def cluster_to_dict(cluster: Cluster) -> dict[str, Any]:
    topics = []
    for name in sorted(set(cluster.partitions_by_topic) | set(cluster.topic_errors)):
        topic_id = cluster.topic_ids.get(name)
        topics.append(
            {
                "name": name,
                "topic_id": str(topic_id) if topic_id else None,
                "internal": name in cluster.internal_topics,
                "error": error_name(cluster.topic_errors.get(name, 0)),
                "partitions": [partition_to_dict(p) for p in cluster.partitions_for_topic(name)],
            }
        )
    return {
        "cluster_id": cluster.cluster_id,
        "controller_id": cluster.controller_id,
        "brokers": [
            {"id": n.id, "host": n.host, "port": n.port, "rack": n.rack}
            for n in sorted(cluster.nodes, key=lambda n: n.id)
        ],
        "topics": topics,
    }


@dataclass(frozen=True, slots=True)
class Change:
    kind: str
    subject: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "subject": self.subject, "detail": self.detail}

    def __str__(self) -> str:
        return f"{self.kind:<18} {self.subject}: {self.detail}"


def _ids(values: tuple[int, ...]) -> str:
    return ",".join(map(str, values)) or "-"


def diff_clusters(old: Cluster, new: Cluster) -> list[Change]:
    """What changed from ``old`` to ``new``: brokers, controller, topics, partitions."""
    out: list[Change] = []
    for node_id in sorted(set(old.nodes_by_id) | set(new.nodes_by_id)):
        a, b = old.nodes_by_id.get(node_id), new.nodes_by_id.get(node_id)
        if a is None and b is not None:
            out.append(Change("broker_added", f"broker {node_id}", b.address))
        elif b is None and a is not None:
            out.append(Change("broker_removed", f"broker {node_id}", a.address))
        elif a != b and a is not None and b is not None:
            out.append(Change("broker_changed", f"broker {node_id}", f"{a} -> {b}"))
    if old.controller_id != new.controller_id:
        out.append(
            Change("controller_changed", "cluster", f"{old.controller_id} -> {new.controller_id}")
        )
    old_topics = set(old.partitions_by_topic) | set(old.topic_errors)
    new_topics = set(new.partitions_by_topic) | set(new.topic_errors)
    for name in sorted(old_topics | new_topics):
        old_err, new_err = old.topic_errors.get(name, 0), new.topic_errors.get(name, 0)
        if name not in new_topics:
            out.append(Change("topic_deleted", name, "gone"))
            continue
        if name not in old_topics:
            count = new.partition_count(name)
            detail = f"{count} partitions" if count is not None else str(error_name(new_err))
            out.append(Change("topic_created", name, detail))
            continue
        if old_err != new_err:
            out.append(
                Change("topic_error", name, f"{error_name(old_err)} -> {error_name(new_err)}")
            )
        if old.topic_ids.get(name) != new.topic_ids.get(name) and name in old.topic_ids:
            out.append(Change("topic_recreated", name, f"topic id -> {new.topic_ids.get(name)}"))
        out.extend(_partition_changes(old, new, name))
    return out


def _partition_changes(old: Cluster, new: Cluster, topic: str) -> list[Change]:
    out: list[Change] = []
    a_parts = {p.partition: p for p in old.partitions_for_topic(topic)}
    b_parts = {p.partition: p for p in new.partitions_for_topic(topic)}
    if len(a_parts) != len(b_parts):
        out.append(Change("partitions_changed", topic, f"{len(a_parts)} -> {len(b_parts)}"))
    for index in sorted(a_parts.keys() & b_parts.keys()):
        a, b = a_parts[index], b_parts[index]
        subject = f"{topic}-{index}"
        if a.leader_id != b.leader_id:
            out.append(
                Change(
                    "leader_changed",
                    subject,
                    f"{a.leader_id} -> {b.leader_id} (epoch {b.leader_epoch})",
                )
            )
        if a.replicas != b.replicas:
            out.append(
                Change("replicas_changed", subject, f"{_ids(a.replicas)} -> {_ids(b.replicas)}")
            )
        if a.isr != b.isr:
            out.append(Change("isr_changed", subject, f"{_ids(a.isr)} -> {_ids(b.isr)}"))
        if a.offline_replicas != b.offline_replicas:
            out.append(
                Change(
                    "offline_changed",
                    subject,
                    f"{_ids(a.offline_replicas)} -> {_ids(b.offline_replicas)}",
                )
            )
        if a.error_code != b.error_code:
            out.append(
                Change(
                    "partition_error",
                    subject,
                    f"{error_name(a.error_code)} -> {error_name(b.error_code)}",
                )
            )
    return out
