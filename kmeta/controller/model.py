"""ControllerContext: the controller's cluster state — brokers, topics and partitions (Kafka's
ControllerContext, which KafkaController and its state machines share).

Mutated only by the controller's event task (one event at a time), so it needs no locks.
Partition states are immutable tuples replaced whole, which makes "what changed in this
event" a plain set of (topic, partition) keys.

ISR lists are kept in replica-assignment order, so "first live replica in ISR order" and
Kafka's "first replica in assignment order that is live and in the ISR" pick the same leader.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import NamedTuple

from kmeta.metadata.model import Endpoint, TopicPartitionKey
from kmeta.net.security.acl import AclBinding


@dataclass(slots=True)
class BrokerInfo:
    broker_id: int
    epoch: int
    incarnation_id: str
    listeners: tuple[Endpoint, ...]
    rack: str | None = None
    alive: bool = True  # False: fenced (session expired or shut down)

    def endpoint(self, name: str | None) -> Endpoint | None:
        """The listener called ``name``; with None, the first one."""
        for ep in self.listeners:
            if name is None or ep.listener == name:
                return ep
        return None


class PartitionRegistration(NamedTuple):
    """One partition as the controller owns it (Kafka's ``PartitionRegistration``): its replica
    assignment and its LeaderAndIsr. What brokers cache is another shape, the wire's
    ``UpdateMetadataPartitionState`` (``kmeta.metadata.model.PartitionState``)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0  # ZooKeeper's zkVersion: bumped on every change


class ProducerIdsBlock(NamedTuple):
    """A block of producer ids the controller handed to a broker (Kafka's
    ``ProducerIdsBlock``): ``size`` ids from ``first_producer_id``."""

    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    @property
    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.size


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)
    #: the topic's config overrides (Kafka's /config/topics/<topic>), validated, as kept
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class ControllerContext:
    controller_epoch: int = 0
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    #: topics whose deletion started (leader -2 sent) but is not finished
    deleting: set[str] = field(default_factory=set)
    #: topics whose overrides were all just removed: the UpdateMetadata being built says so
    #: with an empty list (otherwise no overrides go out as null, which costs nothing to
    #: encode); set and cleared around one send by the TopicConfigManager
    configs_cleared: set[str] = field(default_factory=set)
    #: the cluster's ACLs (CreateAcls / DeleteAcls); every broker holds a copy
    acls: set[AclBinding] = field(default_factory=set)

    def live_broker_ids(self) -> list[int]:
        return sorted(b.broker_id for b in self.brokers.values() if b.alive)

    def is_alive(self, broker_id: int) -> bool:
        broker = self.brokers.get(broker_id)
        return broker is not None and broker.alive

    def partition(self, tp: TopicPartitionKey) -> PartitionRegistration:
        return self.topics[tp[0]].partitions[tp[1]]

    def all_partitions(self) -> list[TopicPartitionKey]:
        return [(t.name, p) for t in self.topics.values() for p in t.partitions]

    def partitions_on(self, broker_id: int) -> list[TopicPartitionKey]:
        return [
            (t.name, p)
            for t in self.topics.values()
            for p, st in t.partitions.items()
            if broker_id in st.replicas
        ]

    def offline_replicas(self, state: PartitionRegistration) -> list[int]:
        return [r for r in state.replicas if not self.is_alive(r)]

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        for t in self.topics.values():
            if t.topic_id == topic_id:
                return t
        return None
