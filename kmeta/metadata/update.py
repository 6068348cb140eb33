"""MetadataUpdate: one UpdateMetadata applied in steps, published as one snapshot.

:meth:`kmeta.metadata.cache.MetadataCache.update_metadata` applies a decoded request in one
call. A broker that receives a million partitions instead decodes and applies them topic by
topic, yielding to its event loop between steps (:mod:`kmeta.server.handlers.update_metadata`):

    update = cache.begin_update(version)
    for topic state in the request: update.add_topic(name, topic_id, partition_states, configs)
    deleted = update.finish(correlation_id, request)   # the request's other fields

Until ``finish`` nothing is published: every reader keeps the snapshot the update started
from, and the new one (version + 1) is assigned once, so no reader ever sees half an update.
The caller must not start another update of the same cache before this one finishes (the
broker applies control requests one at a time); ``finish`` refuses to publish over a snapshot
it did not start from.
"""

from __future__ import annotations

import enum
import operator
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal, Protocol, TypeAlias

from kmeta.metadata.cowmap import DELETED, CowMap, _Deleted
from kmeta.metadata.model import LEADER_DURING_DELETE, Broker, Node, TopicPartition
from kmeta.metadata.partitions import TopicBuilder, TopicPartitions
from kmeta.metadata.snapshot import MetadataSnapshot, TopicNames
from kmeta.protocol.codec.stream import Distinct
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.messages.update_metadata import (
    KmetaTopicConfig,
    UpdateMetadataBroker,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)

_LEADER = operator.attrgetter("leader")
FULL_UPDATE = 2  # UpdateMetadata v8 Type: 0 unknown, 1 incremental, 2 full (KIP-866)


class _NotSent(enum.Enum):
    NOT_SENT = enum.auto()


NOT_SENT: Final = _NotSent.NOT_SENT
"""``configs`` of a topic state that has no kmeta_topic_configs field (v0-5)."""
#: a topic state's pushed configs: the topic's whole override set, None (keep), or NOT_SENT
PushedConfigs: TypeAlias = Sequence[KmetaTopicConfig] | Literal[_NotSent.NOT_SENT] | None


class UpdatedCache(Protocol):
    """What an update reads and publishes into (the MetadataCache): a typed seam, so that the
    cache imports its updates and they do not import it back."""

    snapshot: MetadataSnapshot
    #: replica/ISR sets shared by every topic's partitions
    interned: dict[tuple[int, ...], tuple[int, ...]]

    def live_brokers_of(
        self, live: Sequence[UpdateMetadataBroker], version: int
    ) -> tuple[dict[int, Broker], dict[int, dict[str, Node]]]: ...

    def log_applied(
        self, snap: MetadataSnapshot, request: UpdateMetadataRequest, correlation_id: int, topics: int, deleted: int,
        brokers: int,
    ) -> None: ...  # fmt: skip


class MetadataUpdate:
    """The next snapshot of one cache, built from one request's topic states."""

    def __init__(self, cache: UpdatedCache, version: int) -> None:
        self.cache = cache
        self.base = cache.snapshot
        self.version = version
        self._work: dict[str, TopicBuilder] = {}
        self.deleted: dict[TopicPartition, None] = {}  # ordered set
        self._ids: dict[str, uuid.UUID | _Deleted] = {}
        self._configs: dict[str, Sequence[KmetaTopicConfig] | None] = {}  # None: keep
        self.topics = 0
        self.partitions = 0
        #: the topic states' names, in request order (for the state-change log)
        self.topic_names: list[str] = []

    def add_topic(
        self,
        name: str,
        topic_id: uuid.UUID | None,
        parts: Iterable[UpdateMetadataPartitionState] | Distinct,
        configs: PushedConfigs = NOT_SENT,
    ) -> None:
        """One topic's partition states (or, as a broker reads them from the wire, their
        distinct states: :class:`kmeta.protocol.codec.stream.Distinct`), its id (v5+; None before
        v7) and its pushed configs (v6+)."""
        self.topics += 1
        self.topic_names.append(name)
        if self.version >= 5:
            self._ids[name] = DELETED if topic_id in (None, ZERO_UUID) else topic_id
        if configs is not NOT_SENT:
            self._configs[name] = configs
        builder = self._work.get(name)
        if builder is None:
            builder = TopicBuilder(name, self.base.partition_states.get(name), self.cache.interned)
            self._work[name] = builder
        deleted = self.deleted
        if isinstance(parts, Distinct):
            if LEADER_DURING_DELETE not in map(_LEADER, parts.states):
                if parts.indexes:
                    builder.put_distinct(parts.indexes, parts.keys, parts.states)
                if deleted:
                    for i in parts.indexes:
                        deleted.pop(TopicPartition(name, i), None)
                self.partitions += len(parts.indexes)
                return
            every = parts.states
            parts = [every[k]._replace(partition_index=i) for i, k in zip(parts.indexes, parts.keys, strict=True)]
        states = parts if isinstance(parts, list | tuple) else list(parts)
        if LEADER_DURING_DELETE not in map(_LEADER, states):  # (the common case: C speed)
            if states:  # (a topic state without partitions changes nothing)
                builder.put_states(states)
            if deleted:
                for p in states:
                    deleted.pop(TopicPartition(name, p.partition_index), None)
            self.partitions += len(states)
            return
        put = builder.put
        for p in states:
            index: int = p.partition_index
            if p.leader == LEADER_DURING_DELETE:
                builder.delete(index)
                deleted[TopicPartition(name, index)] = None
                continue
            put(index, p.controller_epoch, p.leader, p.leader_epoch, p.isr, p.zk_version,
                p.replicas, p.offline_replicas)  # fmt: skip
            if deleted:
                deleted.pop(TopicPartition(name, index), None)
        self.partitions += len(states)

    def finish(self, correlation_id: int, request: UpdateMetadataRequest) -> list[TopicPartition]:
        """Publish the snapshot; ``request`` carries the other fields (controller id and
        epoch, live brokers, v8 type and KRaft flag). Returns the deleted partitions."""
        cache, old, version = self.cache, self.base, self.version
        if cache.snapshot is not old:
            raise RuntimeError("another update was published while this one was being applied")
        brokers, nodes = cache.live_brokers_of(request.live_brokers, version)
        controller_id: int | None = request.controller_id if request.controller_id >= 0 else None
        kraft_controller_id = None
        if version >= 8 and request.is_kraft_controller:
            kraft_controller_id, controller_id = controller_id, min(brokers, default=None)
        full = version >= 8 and request.type == FULL_UPDATE
        states = old.partition_states
        changes: dict[str, TopicPartitions | _Deleted] = {}
        if full:
            for name, cached in states.items():
                if name not in self._work:
                    self.deleted.update(dict.fromkeys(TopicPartition(name, i) for i in cached))
                    changes[name] = DELETED
                    self._ids[name] = DELETED
        for name, builder in self._work.items():
            if full:
                self.deleted.update(dict.fromkeys(TopicPartition(name, i) for i in builder.drop_unseen()))
            if not builder.changed:
                continue
            if len(builder):
                changes[name] = builder.freeze()
            else:
                self._ids[name] = DELETED
                if name in states:
                    changes[name] = DELETED
        topic_index = old.topic_index
        if any((v is DELETED) or (k not in states) for k, v in changes.items()):
            topic_index = TopicNames()  # the topic set changed
        if changes:
            states = states.evolve(changes)
        cache.snapshot = snap = MetadataSnapshot(
            partition_states=states,
            topic_configs=self._evolve_configs(old.topic_configs, states, topic_index is not old.topic_index, full),
            topic_ids=_evolve_ids(old.topic_ids, self._ids),
            controller_id=controller_id,
            alive_brokers=brokers,
            alive_nodes=nodes,
            cluster_id=old.cluster_id,
            version=old.version + 1,
            kraft_controller_id=kraft_controller_id,
            topic_index=topic_index,
        )  # fmt: skip
        cache.log_applied(snap, request, correlation_id, self.topics, len(self.deleted), len(brokers))
        return list(self.deleted)

    def _evolve_configs(
        self,
        configs: CowMap[str, Mapping[str, str]],
        states: Mapping[str, TopicPartitions],
        topic_set_changed: bool,
        full: bool,
    ) -> CowMap[str, Mapping[str, str]]:
        """The topic configs after this update. A topic state's list replaces the topic's set;
        null keeps it, except in a FULL update, which carries every topic's set (null: none).
        Topics that no longer exist keep none. O(topic states), plus O(configured topics)
        when the topic set changed or the update is FULL."""
        changes: dict[str, Mapping[str, str] | _Deleted] = {}
        said: set[str] = set()
        for name, pushed in self._configs.items():
            if pushed is None:
                continue
            said.add(name)
            if pushed and name in states:
                new = {c.name: c.value for c in pushed}
                if configs.get(name) != new:
                    changes[name] = new
            elif name in configs:
                changes[name] = DELETED
        if topic_set_changed or full:
            for name in configs:
                if name not in states or (full and name not in said):
                    changes[name] = DELETED
        if not changes:
            return configs
        return configs.evolve(changes)


def _evolve_ids(
    ids: CowMap[str, uuid.UUID], changes: Mapping[str, uuid.UUID | _Deleted]
) -> CowMap[str, uuid.UUID]:
    """Only real differences go into the overlay (most updates repeat known ids)."""
    real: dict[str, uuid.UUID | _Deleted] = {}
    for k, v in changes.items():
        if v is DELETED:
            if k in ids:
                real[k] = v
        elif ids.get(k) != v:
            real[k] = v
    if not real:
        return ids
    return ids.evolve(real)
