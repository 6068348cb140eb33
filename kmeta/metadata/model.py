"""Value types of the metadata cache: brokers, endpoints, nodes, partitions.

All are immutable (frozen slotted dataclasses or NamedTuples), so snapshots can share them
freely and readers never need a copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

# Kafka's SecurityProtocol ids; UpdateMetadata v1-2 endpoints carry no listener name, and
# Kafka names such a listener after its security protocol.
SECURITY_PROTOCOL_NAMES: dict[int, str] = {
    0: "PLAINTEXT",
    1: "SSL",
    2: "SASL_PLAINTEXT",
    3: "SASL_SSL",
}

#: leader id meaning "no leader" (Kafka's LeaderAndIsr.NoLeader)
NO_LEADER = -1
#: leader id the controller sends for a partition being deleted (LeaderAndIsr.LeaderDuringDelete)
LEADER_DURING_DELETE = -2


def listener_for_security_protocol(protocol: int) -> str:
    """The listener name Kafka infers for a v0-2 endpoint.

    Kafka fails the whole request on an unknown id; we keep the endpoint under a name no real
    listener can have, so one odd endpoint cannot stop a metadata update.
    """
    return SECURITY_PROTOCOL_NAMES.get(protocol, f"UNKNOWN_SECURITY_PROTOCOL_{protocol}")


class Endpoint(NamedTuple):
    """One listener of a broker (Kafka's ``EndPoint``; the fields of ``UpdateMetadataEndpoint``).

    What the controller registers for a broker and what the broker's cache keeps. A NamedTuple
    because the controller's stores keep it as the JSON list ``[listener, host, port,
    security_protocol]`` (``list(ep)`` / ``Endpoint(*ep)``).
    """

    listener: str
    host: str
    port: int
    security_protocol: int = 0  # PLAINTEXT


@dataclass(frozen=True, slots=True)
class Node:
    """A broker as seen on one listener (Kafka's ``org.apache.kafka.common.Node``): what a
    Metadata response lists, what the client connects to. Bootstrap placeholders (client side)
    have negative ids."""

    id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __str__(self) -> str:
        rack = f" rack: {self.rack}" if self.rack else ""
        return f"{self.host}:{self.port} (id: {self.id}{rack})"


@dataclass(frozen=True, slots=True)
class Broker:
    """A live broker: its id, rack and every endpoint it advertised."""

    id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None

    def endpoint(self, listener: str) -> Endpoint | None:
        for ep in self.endpoints:
            if ep.listener == listener:
                return ep
        return None

    def node(self, listener: str) -> Node | None:
        ep = self.endpoint(listener)
        return None if ep is None else Node(self.id, ep.host, ep.port, self.rack)


class TopicPartition(NamedTuple):
    """One partition of one topic (Kafka's ``org.apache.kafka.common.TopicPartition``).

    The one name for a partition across layers: the broker's cache, the client and the CLI.
    A NamedTuple, so it hashes and compares equal to the plain pair ``TopicPartitionKey``.
    """

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


#: A partition as the plain ``(topic, partition)`` pair, for code that makes partition keys by
#: the million: the controller's state, events and request batches. ``TopicPartition`` is a
#: subtype, so either is accepted where this is. Why not the NamedTuple there: a tuple
#: subclass stays tracked by the garbage collector while an exact tuple of a str and an int is
#: untracked at its first collection, and building one costs a Python-level ``__new__``:
#: ``ControllerContext.all_partitions()`` over 1M partitions took 2.5-10x as long with it.
TopicPartitionKey = tuple[str, int]


class PartitionState(NamedTuple):
    """One partition as the controller last described it.

    Same fields, in the same order, as the decoded ``UpdateMetadataPartitionState`` record
    (``PartitionState(*record)`` converts). We store our own typed copy rather than the decoded
    record because the cache normalises what it keeps: ``topic_name`` is always set (decoded
    v5+ records carry ``''``; v0-4 records carry one fresh string per partition) and points at
    the one shared topic string, and ``isr``/``replicas`` are interned so partitions with the
    same replica set share one tuple. That halves the memory per cached partition (see
    benchmarks/cache_update.py) for one small allocation per partition in the update.
    """

    topic_name: str
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]
