"""Coordinators: the broker's two coordinator runtimes, ``groups`` on ``__consumer_offsets``
and ``transactions`` on ``__transaction_state`` (``BrokerState.coordinators``).

The broker tells it what changed: a LeaderAndIsr or StopReplica of an internal topic
(:meth:`Coordinators.topic_replicas_changed`), a high watermark that moved
(:meth:`Coordinators.high_watermark_moved`, from the replica manager), partitions an
UpdateMetadata deleted (:meth:`Coordinators.partitions_deleted`, handed to whoever registered
with :meth:`Coordinators.on_partitions_deleted`: the group coordinator drops their committed
offsets), shutdown (:meth:`Coordinators.close`). The shards come from the packages that own them: each module
named in :data:`SHARD_MODULES` has ``install(coordinators)``, which registers its factory
(``coordinators.register_group_shards(factory)`` /
``coordinators.register_transaction_shards(factory)``), as a handler module registers its API
key in ``kmeta.server.handlers.HANDLER_MODULES``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from kmeta.metadata.cache import MetadataCache
from kmeta.metadata.model import TopicPartitionKey
from kmeta.server.config import BrokerConfig
from kmeta.server.coordinator.internal_topics import (
    GROUP_METADATA_TOPIC,
    TRANSACTION_STATE_TOPIC,
    Forward,
    TopicCreator,
    group_metadata_topic,
    transaction_state_topic,
)
from kmeta.server.coordinator.runtime import CoordinatorRuntime, ShardFactory
from kmeta.server.replica.partition import Partition
from kmeta.server.replica.replica_manager import ReplicaManager

#: modules whose ``install(coordinators)`` registers a shard factory (the group and the
#: transaction coordinators add theirs here)
SHARD_MODULES: tuple[str, ...] = ("kmeta.server.group.install",)

#: FindCoordinator's key types (Kafka's ``FindCoordinatorRequest.CoordinatorType``)
GROUP, TRANSACTION = 0, 1


class Coordinators:
    def __init__(
        self, config: BrokerConfig, replica_manager: ReplicaManager, cache: MetadataCache,
        forwarder: Callable[[], Forward | None],
    ) -> None:  # fmt: skip
        """``forwarder``: the controller link's ``forward`` (None while the broker has no
        controller link)."""
        self.config = config  # (the shard factories read their settings from it)
        self.creator = TopicCreator(cache, forwarder)
        self.groups: CoordinatorRuntime[Any] = CoordinatorRuntime(
            group_metadata_topic(config), replica_manager, cache, self.creator
        )
        self.transactions: CoordinatorRuntime[Any] = CoordinatorRuntime(
            transaction_state_topic(config), replica_manager, cache, self.creator
        )
        self._by_topic = {GROUP_METADATA_TOPIC: self.groups, TRANSACTION_STATE_TOPIC: self.transactions}
        self._deletion_listeners: list[Callable[[Sequence[TopicPartitionKey]], None]] = []
        replica_manager.on_high_watermark = self.high_watermark_moved
        #: called after each applied UpdateMetadata (KIP-848 groups follow their topics)
        self.metadata_listeners: list[Callable[[], None]] = []

    def install(self, modules: tuple[str, ...] | None = None) -> None:
        """Let each of ``modules`` (default: SHARD_MODULES, as it is now) register its shards."""
        for name in SHARD_MODULES if modules is None else modules:
            importlib.import_module(name).install(self)

    def register_group_shards(self, factory: ShardFactory[Any]) -> None:
        self.groups.register_shards(factory)

    def register_transaction_shards(self, factory: ShardFactory[Any]) -> None:
        self.transactions.register_shards(factory)

    def runtime_for(self, key_type: int) -> CoordinatorRuntime[Any] | None:
        """The runtime answering FindCoordinator's ``key_type`` (None: not one Kafka has)."""
        return self.groups if key_type == GROUP else self.transactions if key_type == TRANSACTION else None

    def metadata_applied(self) -> None:
        for listener in self.metadata_listeners:
            listener()

    def topic_replicas_changed(self, topic: str) -> None:
        runtime = self._by_topic.get(topic)
        if runtime is not None:
            runtime.partitions_changed()

    def on_partitions_deleted(self, listener: Callable[[Sequence[TopicPartitionKey]], None]) -> None:
        """``listener`` is told of every partition an UpdateMetadata deletes (Kafka's
        ``KafkaApis`` hands them to ``groupCoordinator.onPartitionsDeleted``)."""
        self._deletion_listeners.append(listener)

    def partitions_deleted(self, partitions: Sequence[TopicPartitionKey]) -> None:
        for listener in self._deletion_listeners:
            listener(partitions)

    def high_watermark_moved(self, partition: Partition) -> None:
        runtime = self._by_topic.get(partition.topic)
        if runtime is not None:
            runtime.high_watermark_moved(partition.index)

    def close(self) -> None:
        self.creator.close()
        self.groups.close()
        self.transactions.close()


__all__ = ["GROUP", "SHARD_MODULES", "TRANSACTION", "Coordinators", "Forward"]
