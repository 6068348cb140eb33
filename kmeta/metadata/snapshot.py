"""MetadataSnapshot: one immutable version of everything the broker knows.

Readers take ``snap = cache.snapshot`` once per request and use only ``snap``; the cache
publishes a new snapshot with a single assignment, so a reader never sees half an update.

Snapshots share structure: ``partition_states`` and ``topic_ids`` are ``CowMap``s whose
unchanged entries (and each untouched topic's inner partition dict) are the very same
objects in consecutive snapshots. Nothing reachable from a snapshot is mutated once it is
published - except ``derived`` (below).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kmeta.metadata.cowmap import CowMap
from kmeta.metadata.model import Broker, Node, PartitionState
from kmeta.metadata.partitions import TopicPartitions


class TopicNames:
    """Lazily sorted topic names, shared by consecutive snapshots with the same topic set.

    Updates that only move leaders (the common case) keep the set, so the sort is paid once
    per topic-set change, on first use, not once per update.
    """

    __slots__ = ("names",)

    def __init__(self) -> None:
        self.names: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True, eq=False)
class MetadataSnapshot:
    """Immutable metadata as of one applied UpdateMetadata (``version``).

    ``derived`` is the one mutable part: a memo dict for data computed *from* this snapshot
    (the server keeps encoded per-topic Metadata response blocks there, keyed as it likes).
    It starts empty with each new snapshot and dies with it, so nothing in it can go stale;
    it is safe without locks because the broker runs one event loop thread and the entries
    are pure functions of the snapshot (a race could only compute the same value twice).
    Snapshots compare by identity.
    """

    partition_states: CowMap[str, TopicPartitions]
    """topic -> its partitions (index -> state), as columns. Every topic present has at least
    one partition; a topic's ``derived`` memo lives as long as the topic is unchanged, across
    snapshots (consecutive snapshots share the unchanged topics' objects)."""
    topic_ids: CowMap[str, uuid.UUID]
    """topic -> id (UpdateMetadata v7+); a topic without a known id is absent."""
    controller_id: int | None
    """The controller id to report to clients; None when there is none (see MetadataCache)."""
    alive_brokers: Mapping[int, Broker]
    alive_nodes: Mapping[int, Mapping[str, Node]]
    """broker id -> listener name -> Node."""
    cluster_id: str | None
    version: int
    """0 for the empty cache; +1 for every applied UpdateMetadata."""
    kraft_controller_id: int | None = None
    """Set instead of a broker controller id when a KRaft controller sent the update (KIP-866)."""
    topic_configs: CowMap[str, Mapping[str, str]] = field(default_factory=CowMap)
    """topic -> its config overrides (name -> value), as the controller last pushed them
    (kmeta's tagged field on UpdateMetadata's topic state); absent: no overrides."""
    derived: dict[Any, Any] = field(default_factory=dict, repr=False)
    topic_index: TopicNames = field(default_factory=TopicNames, repr=False)

    @classmethod
    def empty(cls, cluster_id: str | None = None) -> MetadataSnapshot:
        return cls(
            partition_states=CowMap(),
            topic_ids=CowMap(),
            controller_id=None,
            alive_brokers={},
            alive_nodes={},
            cluster_id=cluster_id,
            version=0,
        )

    @property
    def topic_names_sorted(self) -> tuple[str, ...]:
        """Every topic, sorted; computed once per topic set and shared across snapshots."""
        index = self.topic_index
        names = index.names
        if names is None:
            names = index.names = tuple(sorted(self.partition_states))
        return names

    def partition_count(self, topic: str) -> int:
        """Number of partitions of ``topic``; 0 when unknown."""
        parts = self.partition_states.get(topic)
        return 0 if parts is None else len(parts)

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        parts = self.partition_states.get(topic)
        return None if parts is None else parts.get(partition)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return self.topic_ids.get(topic)

    def alive_node(self, broker_id: int, listener: str) -> Node | None:
        nodes = self.alive_nodes.get(broker_id)
        return None if nodes is None else nodes.get(listener)
