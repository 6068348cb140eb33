"""MetadataCache: the broker's copy-on-write view of what the controller pushed.

Rules (Kafka 3.x ``ZkMetadataCache.updateMetadata``):

* live brokers and their per-listener nodes are replaced wholesale by every update;
* the controller id comes from the request (negative: none). When ``is_kraft_controller``
  (v8, KIP-866) the id names a KRaft controller, not a broker: it is kept as
  ``kraft_controller_id`` and clients are told a live broker instead (Kafka picks one at
  random; we take the lowest id, so answers are stable);
* topic ids come from v5+ ``topic_states``: a non-zero id is set, the zero uuid removes the
  topic's id (so v5-6 requests, which carry no ids, clear them, as in Kafka);
* an update without partition states changes only brokers, controller and topic ids;
* a partition state whose leader is -2 (LeaderDuringDelete) removes the partition, and a
  topic goes with its last partition (its id too); any other state is added or replaced;
  every -2 partition is returned as deleted unless a later state in the same request
  re-adds it;
* v8 with ``type`` FULL (2) replaces the whole partition set: partitions the request does
  not mention are removed and returned as deleted (Kafka only does this for a KRaft
  controller during migration and matches topics by id; we accept FULL from any controller
  and match by name, which gives the same final state);
* when this broker is among the live brokers and another live broker's listener names
  differ from its own, an error is logged (logger ``kmeta.metadata``);
* topic configs (kmeta's tagged field ``kmeta_topic_configs`` on a v6+ topic state, which
  Kafka brokers skip): a list replaces the topic's whole override set, null leaves it as it
  is, except in a FULL update, which carries every topic's set (null: no overrides); a topic
  that is gone (or never arrived) keeps no configs.

Cost: an update touching K partitions in T topics copies those T topics' partition dicts
and a CowMap overlay (O(sqrt(topics)) at most), never the whole partition set.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, KeysView, Mapping, Sequence
from typing import Any, overload

from kmeta.metadata.cowmap import DELETED, CowMap, _Deleted
from kmeta.metadata.model import (
    LEADER_DURING_DELETE,
    Broker,
    Endpoint,
    Node,
    PartitionState,
    TopicPartition,
    listener_for_security_protocol,
)
from kmeta.metadata.snapshot import MetadataSnapshot, TopicNames
from kmeta.protocol.types import ZERO_UUID

log = logging.getLogger("kmeta.metadata")

FULL_UPDATE = 2  # UpdateMetadata v8 Type: 0 unknown, 1 incremental, 2 full (KIP-866)
# Replica/ISR tuples are interned so identical replica sets share one tuple; past this many
# distinct sets the table is dropped and rebuilt (sharing is an optimisation, not a rule).
_INTERN_LIMIT = 100_000


class MetadataCache:
    """Holds the current MetadataSnapshot; ``update_metadata`` publishes the next one."""

    def __init__(self, broker_id: int, cluster_id: str | None = None) -> None:
        self.broker_id = broker_id
        self.snapshot: MetadataSnapshot = MetadataSnapshot.empty(cluster_id)
        self._interned: dict[tuple[int, ...], tuple[int, ...]] = {}
        # the last live_brokers seen and what they became: most updates repeat them
        self._last_live: tuple[int, Any, dict[int, Broker], dict[int, dict[str, Node]]] | None = (
            None
        )

    # --- reads: each takes the snapshot once ---------------------------------------------

    @overload
    def contains(self, item: str) -> bool: ...
    @overload
    def contains(self, item: TopicPartition) -> bool: ...

    def contains(self, item: str | TopicPartition) -> bool:
        """Whether a topic (str) or a partition (TopicPartition) is cached."""
        if isinstance(item, str):
            return item in self.snapshot.partition_states
        return self.contains_partition(item)

    def contains_partition(self, tp: TopicPartition) -> bool:
        return self.snapshot.partition(tp.topic, tp.partition) is not None

    def get_partition_info(self, topic: str, partition: int) -> PartitionState | None:
        return self.snapshot.partition(topic, partition)

    def get_all_topics(self) -> KeysView[str]:
        """A set-like view of the current snapshot's topics (O(1) to get; never changes)."""
        return self.snapshot.partition_states.keys()

    def get_all_partitions(self) -> dict[TopicPartition, PartitionState]:
        """Every cached partition (O(all partitions), as in Kafka)."""
        return {
            TopicPartition(topic, index): state
            for topic, parts in self.snapshot.partition_states.items()
            for index, state in parts.items()
        }

    def get_partition_replica_endpoints(self, tp: TopicPartition, listener: str) -> dict[int, Node]:
        """Replica id -> node for the replicas that are alive and have ``listener``."""
        snap = self.snapshot
        state = snap.partition(tp.topic, tp.partition)
        if state is None:
            return {}
        out: dict[int, Node] = {}
        for replica in state.replicas:
            node = snap.alive_node(replica, listener)
            if node is not None:
                out[replica] = node
        return out

    def get_alive_brokers(self) -> tuple[Broker, ...]:
        return tuple(self.snapshot.alive_brokers.values())

    def get_alive_broker_node(self, broker_id: int, listener: str) -> Node | None:
        return self.snapshot.alive_node(broker_id, listener)

    def get_alive_broker_nodes(self, listener: str) -> list[Node]:
        """The live brokers that have ``listener``, as nodes on it."""
        return [n for nodes in self.snapshot.alive_nodes.values() if (n := nodes.get(listener))]

    def get_controller_id(self) -> int | None:
        return self.snapshot.controller_id

    def get_topic_id(self, topic: str) -> uuid.UUID | None:
        return self.snapshot.topic_ids.get(topic)

    # --- the one writer -------------------------------------------------------------------

    def update_metadata(self, correlation_id: int, request: Any) -> list[TopicPartition]:
        """Apply a decoded UpdateMetadataRequest (v0-8); return the deleted partitions.

        Builds the next snapshot from the current one and publishes it with one assignment.
        """
        old = self.snapshot
        version: int = request.version
        brokers, nodes = self._live_brokers(request.live_brokers, version)
        topics = _topic_groups(request, version)

        controller_id: int | None = request.controller_id if request.controller_id >= 0 else None
        kraft_controller_id = None
        if version >= 8 and request.is_kraft_controller:
            kraft_controller_id, controller_id = controller_id, min(brokers, default=None)

        id_changes: dict[str, uuid.UUID | _Deleted] = {}
        if version >= 5:
            for name, topic_id, _ in topics:
                id_changes[name] = DELETED if topic_id in (None, ZERO_UUID) else topic_id

        full = version >= 8 and request.type == FULL_UPDATE
        deleted: dict[TopicPartition, None] = {}  # ordered set
        states = old.partition_states
        topic_index = old.topic_index
        if full or any(parts for _, _, parts in topics):
            work = self._apply_partitions(old.partition_states, topics, full, deleted, id_changes)
            changes: dict[str, Mapping[int, PartitionState] | _Deleted] = {}
            for name, parts in work.items():
                if parts is not None:
                    changes[name] = parts
                elif name in states:
                    changes[name] = DELETED
            if any((v is DELETED) or (k not in states) for k, v in changes.items()):
                topic_index = TopicNames()  # the topic set changed
            states = _evolve(states, changes)

        self.snapshot = MetadataSnapshot(
            partition_states=states,
            topic_configs=_evolve_configs(
                old.topic_configs, request, version, states, topic_index is not old.topic_index, full
            ),
            topic_ids=_evolve_ids(old.topic_ids, id_changes),
            controller_id=controller_id,
            alive_brokers=brokers,
            alive_nodes=nodes,
            cluster_id=old.cluster_id,
            version=old.version + 1,
            kraft_controller_id=kraft_controller_id,
            topic_index=topic_index,
        )
        log.debug(
            "metadata v%d from controller %s epoch %s (correlation id %d): %d topics, %d deleted "
            "partitions, %d live brokers",
            self.snapshot.version, request.controller_id, request.controller_epoch,
            correlation_id, len(topics), len(deleted), len(brokers),
        )  # fmt: skip
        return list(deleted)

    def _apply_partitions(
        self,
        current: Mapping[str, Mapping[int, PartitionState]],
        topics: Sequence[tuple[str, uuid.UUID | None, Sequence[Any]]],
        full: bool,
        deleted: dict[TopicPartition, None],
        id_changes: dict[str, uuid.UUID | _Deleted],
    ) -> dict[str, dict[int, PartitionState] | None]:
        """Apply the request's partition states to working copies of the touched topics.

        Returns topic -> new partition dict, or None for a topic that no longer exists.
        """
        work: dict[str, dict[int, PartitionState] | None] = {}
        if full:
            self._drop_unmentioned(current, topics, work, deleted, id_changes)
        # The hot loop of a big update: locals, a cached dict lookup before the interning
        # call, and tuple.__new__ (NamedTuple.__new__ is a Python-level wrapper).
        intern = self._intern
        shared = self._interned.get
        make = tuple.__new__
        for name, _, parts in topics:
            if name in work:
                topic_parts = work[name]
            else:
                cur = current.get(name)
                topic_parts = work[name] = None if cur is None else dict(cur)
            for p in parts:
                index: int = p.partition_index
                if p.leader == LEADER_DURING_DELETE:
                    if topic_parts is not None:
                        topic_parts.pop(index, None)
                        if not topic_parts:
                            topic_parts = work[name] = None
                            id_changes[name] = DELETED
                    deleted[TopicPartition(name, index)] = None
                    continue
                if topic_parts is None:
                    topic_parts = work[name] = {}
                isr, replicas, offline = p.isr, p.replicas, p.offline_replicas
                topic_parts[index] = make(PartitionState, (
                    name, index, p.controller_epoch, p.leader, p.leader_epoch,
                    shared(isr) or intern(isr), p.zk_version,
                    shared(replicas) or intern(replicas), offline and (shared(offline) or intern(offline)),
                ))  # fmt: skip
                if deleted:
                    deleted.pop(TopicPartition(name, index), None)
        return work

    @staticmethod
    def _drop_unmentioned(
        current: Mapping[str, Mapping[int, PartitionState]],
        topics: Sequence[tuple[str, uuid.UUID | None, Sequence[Any]]],
        work: dict[str, dict[int, PartitionState] | None],
        deleted: dict[TopicPartition, None],
        id_changes: dict[str, uuid.UUID | _Deleted],
    ) -> None:
        """FULL update: remove every cached partition the request does not mention."""
        mentioned: dict[str, set[int]] = {}
        for name, _, parts in topics:
            mentioned.setdefault(name, set()).update(p.partition_index for p in parts)
        for name, cached in current.items():
            keep = mentioned.get(name, ())
            gone = [i for i in cached if i not in keep]
            if not gone:
                continue
            deleted.update(dict.fromkeys(TopicPartition(name, i) for i in gone))
            remaining = {i: s for i, s in cached.items() if i in keep}
            work[name] = remaining or None
            if not remaining:
                id_changes[name] = DELETED

    def _intern(self, ids: Iterable[int]) -> tuple[int, ...]:
        t = tuple(ids)
        interned = self._interned
        shared = interned.get(t)
        if shared is not None:
            return shared
        if len(interned) >= _INTERN_LIMIT:
            interned.clear()
        interned[t] = t
        return t

    def _live_brokers(
        self, live: Any, version: int
    ) -> tuple[dict[int, Broker], dict[int, dict[str, Node]]]:
        """Brokers and nodes for ``live``, reused when equal to the previous update's.

        Reuse is safe because the dicts are never mutated once published; comparing the
        decoded tuples is C-speed, rebuilding them is a few microseconds per broker.
        """
        last = self._last_live
        if last is not None and last[0] == version and last[1] == live:
            brokers, nodes = last[2], last[3]
        else:
            brokers, nodes = _live_brokers(live, version)
            self._last_live = (version, live, brokers, nodes)
        self._check_listeners(nodes)
        return brokers, nodes

    def _check_listeners(self, nodes: Mapping[int, Mapping[str, Node]]) -> None:
        mine = nodes.get(self.broker_id)
        if mine is None:
            return
        listeners = mine.keys()
        if any(n.keys() != listeners for n in nodes.values()):
            detail = {b: sorted(n) for b, n in nodes.items()}
            log.error("Listeners are not identical across brokers: %s", detail)


def _live_brokers(
    live: Iterable[Any], version: int
) -> tuple[dict[int, Broker], dict[int, dict[str, Node]]]:
    """Brokers and per-listener nodes from ``live_brokers``, normalised as Kafka does.

    v0 has one PLAINTEXT host/port; v1-2 endpoints have no listener name (it is the
    security protocol's name); v0-1 carry no rack (None, not the decoded default '').
    """
    brokers: dict[int, Broker] = {}
    nodes: dict[int, dict[str, Node]] = {}
    for b in live:
        rack: str | None = b.rack if version >= 2 else None
        if version == 0 and not b.endpoints:
            endpoints: tuple[Endpoint, ...] = (Endpoint("PLAINTEXT", b.v0_host, b.v0_port, 0),)
        else:
            endpoints = tuple(
                Endpoint(
                    ep.listener if version >= 3 or ep.listener else listener_for_security_protocol(ep.security_protocol),
                    ep.host, ep.port, ep.security_protocol,
                )
                for ep in b.endpoints
            )  # fmt: skip
        brokers[b.id] = Broker(b.id, endpoints, rack)
        nodes[b.id] = {ep.listener: Node(b.id, ep.host, ep.port, rack) for ep in endpoints}
    return brokers, nodes


def _topic_groups(request: Any, version: int) -> list[tuple[str, uuid.UUID | None, Sequence[Any]]]:
    """(topic, topic id or None, partition states) per topic, in request order.

    v0-4 list partitions ungrouped with their topic name; grouping keeps each topic's order,
    which is all that matters (states of different topics do not interact).
    """
    if version >= 5:
        return [
            (ts.topic_name, ts.topic_id if version >= 7 else None, ts.partition_states)
            for ts in request.topic_states
        ]
    grouped: dict[str, list[Any]] = {}
    for p in request.ungrouped_partition_states:
        grouped.setdefault(p.topic_name, []).append(p)
    return [(name, None, parts) for name, parts in grouped.items()]


def _evolve_configs(
    configs: Mapping[str, Mapping[str, str]],
    request: Any,
    version: int,
    states: Mapping[str, Mapping[int, PartitionState]],
    topic_set_changed: bool,
    full: bool,
) -> Mapping[str, Mapping[str, str]]:
    """The topic configs after ``request``. A topic state's list replaces the topic's set;
    null keeps it, except in a FULL update, which carries every topic's set (null: none).
    Topics that no longer exist keep none. O(topic states), plus O(configured topics) when
    the topic set changed or the update is FULL."""
    changes: dict[str, Mapping[str, str] | _Deleted] = {}
    said: set[str] = set()
    if version >= 6:
        for ts in request.topic_states:
            pushed = ts.kmeta_topic_configs
            if pushed is None:
                continue
            name = ts.topic_name
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
    base = configs if isinstance(configs, CowMap) else CowMap(configs)
    return base.evolve(changes)


def _evolve(
    states: Mapping[str, Mapping[int, PartitionState]],
    changes: Mapping[str, Mapping[int, PartitionState] | _Deleted],
) -> Mapping[str, Mapping[int, PartitionState]]:
    if isinstance(states, CowMap):
        return states.evolve(changes)
    return CowMap(states).evolve(changes)


def _evolve_ids(
    ids: Mapping[str, uuid.UUID], changes: Mapping[str, uuid.UUID | _Deleted]
) -> Mapping[str, uuid.UUID]:
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
    base = ids if isinstance(ids, CowMap) else CowMap(ids)
    return base.evolve(real)
