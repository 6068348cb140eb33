"""``Cluster``: an immutable view of one metadata version (Kafka's ``org.apache.kafka.common.Cluster``).

Built once, read many times: every index (nodes by id, partitions by topic, by leader node,
available partitions) is computed in the constructor and exposed read-only, so readers can keep
a ``Cluster`` for as long as they like while the client swaps in newer ones.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from kmeta.metadata.addresses import Address
from kmeta.metadata.model import Node, TopicPartition
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import metadata as md


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition's state. ``leader_id`` is -1 when the response names no leader."""

    topic: str
    partition: int
    leader_id: int
    leader_epoch: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def without_leader_epoch(self) -> PartitionInfo:
        return PartitionInfo(
            self.topic,
            self.partition,
            self.leader_id,
            None,
            self.replicas,
            self.isr,
            self.offline_replicas,
            self.error_code,
        )


def partition_from_response(topic: str, p: md.MetadataResponsePartition) -> PartitionInfo:
    """A ``PartitionInfo`` from a ``MetadataResponsePartition`` record (any version)."""
    epoch = p.leader_epoch
    return PartitionInfo(
        topic,
        p.partition_index,
        p.leader_id,
        epoch if epoch is not None and epoch >= 0 else None,
        tuple(p.replica_nodes),
        tuple(p.isr_nodes),
        tuple(p.offline_replicas or ()),
        p.error_code,
    )


def nodes_from_response(response: md.MetadataResponse) -> list[Node]:
    return [Node(b.node_id, b.host, b.port, b.rack) for b in response.brokers]


class Cluster:
    """An immutable metadata view. Construct it whole; nothing changes it afterwards."""

    __slots__ = (
        "_available_by_topic",
        "_by_node",
        "_by_topic",
        "_by_tp",
        "_nodes",
        "_nodes_by_id",
        "cluster_id",
        "controller_id",
        "internal_topics",
        "invalid_topics",
        "is_bootstrap",
        "topic_errors",
        "topic_ids",
        "unauthorized_topics",
    )

    def __init__(
        self,
        nodes: Iterable[Node],
        partitions: Iterable[PartitionInfo] = (),
        *,
        cluster_id: str | None = None,
        controller_id: int = -1,
        topic_ids: Mapping[str, uuid.UUID] | None = None,
        unauthorized_topics: Iterable[str] = (),
        invalid_topics: Iterable[str] = (),
        internal_topics: Iterable[str] = (),
        topic_errors: Mapping[str, int] | None = None,
        is_bootstrap: bool = False,
    ) -> None:
        self._nodes = tuple(nodes)
        self._nodes_by_id = MappingProxyType({n.id: n for n in self._nodes})
        by_topic: dict[str, list[PartitionInfo]] = {}
        by_node: dict[int, list[PartitionInfo]] = {}
        by_tp: dict[TopicPartition, PartitionInfo] = {}
        for p in partitions:
            by_tp[p.tp] = p
            by_topic.setdefault(p.topic, []).append(p)
            if p.leader_id in self._nodes_by_id:
                by_node.setdefault(p.leader_id, []).append(p)
        for parts in by_topic.values():
            parts.sort(key=lambda p: p.partition)
        self._by_tp = MappingProxyType(by_tp)
        self._by_topic = MappingProxyType({t: tuple(ps) for t, ps in by_topic.items()})
        # available = the leader is a node we know (Kafka: PartitionInfo.leader() != null)
        self._available_by_topic = MappingProxyType(
            {
                t: tuple(p for p in ps if p.leader_id in self._nodes_by_id)
                for t, ps in self._by_topic.items()
            }
        )
        self._by_node = MappingProxyType({n: tuple(ps) for n, ps in by_node.items()})
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self.topic_ids: Mapping[str, uuid.UUID] = MappingProxyType(dict(topic_ids or {}))
        self.unauthorized_topics = frozenset(unauthorized_topics)
        self.invalid_topics = frozenset(invalid_topics)
        self.internal_topics = frozenset(internal_topics)
        self.topic_errors: Mapping[str, int] = MappingProxyType(dict(topic_errors or {}))
        self.is_bootstrap = is_bootstrap

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def empty(cls) -> Cluster:
        return cls(())

    @classmethod
    def bootstrap(cls, addresses: Iterable[Address]) -> Cluster:
        """Placeholder nodes -1, -2, ... for the bootstrap servers, as Kafka's ``Cluster.bootstrap``."""
        nodes = [Node(-1 - i, host, port) for i, (host, port) in enumerate(addresses)]
        return cls(nodes, is_bootstrap=True)

    @classmethod
    def from_response(cls, response: md.MetadataResponse) -> Cluster:
        """The plain view of one Metadata response (no fencing against earlier versions)."""
        partitions: list[PartitionInfo] = []
        topic_ids: dict[str, uuid.UUID] = {}
        errors: dict[str, int] = {}
        internal: list[str] = []
        for t in response.topics:
            if t.name is None:
                continue
            if t.topic_id is not None and t.topic_id != ZERO_UUID:
                topic_ids[t.name] = t.topic_id
            if t.error_code != ErrorCode.NONE:
                errors[t.name] = t.error_code
                continue
            if t.is_internal:
                internal.append(t.name)
            partitions.extend(partition_from_response(t.name, p) for p in t.partitions)
        return cls.of_response(response, partitions, topic_ids, errors, internal)

    @classmethod
    def of_response(
        cls,
        response: md.MetadataResponse,
        partitions: Iterable[PartitionInfo],
        topic_ids: Mapping[str, uuid.UUID],
        errors: Mapping[str, int],
        internal: Iterable[str],
    ) -> Cluster:
        """The response's nodes, cluster and controller ids with the topics already gathered
        from it; the topic errors also give the unauthorized and invalid topic sets."""
        return cls(
            nodes_from_response(response),
            partitions,
            cluster_id=response.cluster_id,
            controller_id=response.controller_id,
            topic_ids=topic_ids,
            unauthorized_topics=[
                n for n, e in errors.items() if e == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            ],
            invalid_topics=[n for n, e in errors.items() if e == ErrorCode.INVALID_TOPIC_EXCEPTION],
            internal_topics=internal,
            topic_errors=errors,
        )

    # -- reading -------------------------------------------------------------------------------
    @property
    def nodes(self) -> tuple[Node, ...]:
        return self._nodes

    @property
    def nodes_by_id(self) -> Mapping[int, Node]:
        return self._nodes_by_id

    def node_by_id(self, node_id: int) -> Node | None:
        return self._nodes_by_id.get(node_id)

    @property
    def controller(self) -> Node | None:
        return self._nodes_by_id.get(self.controller_id)

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self._by_topic)

    @property
    def partitions_by_topic(self) -> Mapping[str, tuple[PartitionInfo, ...]]:
        return self._by_topic

    @property
    def available_partitions_by_topic(self) -> Mapping[str, tuple[PartitionInfo, ...]]:
        return self._available_by_topic

    @property
    def partitions_by_node(self) -> Mapping[int, tuple[PartitionInfo, ...]]:
        """Partitions keyed by their leader's node id."""
        return self._by_node

    def partitions_for_topic(self, topic: str) -> tuple[PartitionInfo, ...]:
        return self._by_topic.get(topic, ())

    def available_partitions_for_topic(self, topic: str) -> tuple[PartitionInfo, ...]:
        return self._available_by_topic.get(topic, ())

    def partitions_for_node(self, node_id: int) -> tuple[PartitionInfo, ...]:
        return self._by_node.get(node_id, ())

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        return self._by_tp.get(tp)

    def leader_for(self, tp: TopicPartition) -> Node | None:
        p = self._by_tp.get(tp)
        return None if p is None else self._nodes_by_id.get(p.leader_id)

    def partition_count(self, topic: str) -> int | None:
        """The number of partitions, or None when the topic is not in this view."""
        parts = self._by_topic.get(topic)
        return None if parts is None else len(parts)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return self.topic_ids.get(topic)

    def __repr__(self) -> str:
        return (
            f"Cluster(id={self.cluster_id!r}, nodes={len(self._nodes)}, "
            f"topics={len(self._by_topic)}, partitions={len(self._by_tp)}, "
            f"controller={self.controller_id}, bootstrap={self.is_bootstrap})"
        )
