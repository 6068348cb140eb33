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

Storage: each topic's partitions are one column block (:class:`kmeta.metadata.partitions
.TopicPartitions`, ~36 bytes per partition, states made on access), and an update is built by
:class:`kmeta.metadata.update.MetadataUpdate`, which a broker can feed topic by topic.

Cost: an update touching K partitions in T topics copies those T topics' column blocks (C
speed) and a CowMap overlay (O(sqrt(topics)) at most), never the whole partition set.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, KeysView, Mapping, Sequence
from typing import overload

from kmeta.metadata.model import (
    Broker,
    Endpoint,
    Node,
    PartitionState,
    TopicPartition,
    listener_for_security_protocol,
)
from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.metadata.update import FULL_UPDATE as FULL_UPDATE
from kmeta.metadata.update import NOT_SENT, MetadataUpdate, PushedConfigs
from kmeta.protocol.messages.update_metadata import (
    UpdateMetadataBroker,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)

log = logging.getLogger("kmeta.metadata")



class MetadataCache:
    """Holds the current MetadataSnapshot; ``update_metadata`` publishes the next one."""

    def __init__(self, broker_id: int, cluster_id: str | None = None) -> None:
        self.broker_id = broker_id
        self.snapshot: MetadataSnapshot = MetadataSnapshot.empty(cluster_id)
        #: replica/ISR sets shared by every topic's partitions (kmeta.metadata.partitions)
        self.interned: dict[tuple[int, ...], tuple[int, ...]] = {}
        # the last live_brokers seen and what they became: most updates repeat them
        self._last_live: (
            tuple[int, Sequence[UpdateMetadataBroker], dict[int, Broker], dict[int, dict[str, Node]]] | None
        ) = None

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

    def update_metadata(self, correlation_id: int, request: UpdateMetadataRequest) -> list[TopicPartition]:
        """Apply a decoded UpdateMetadataRequest (v0-8); return the deleted partitions.

        Builds the next snapshot from the current one and publishes it with one assignment.
        """
        version = request.version
        update = self.begin_update(version)
        for name, topic_id, parts, pushed in _topic_groups(request, version):
            update.add_topic(name, topic_id, parts, pushed)
        return update.finish(correlation_id, request)

    def begin_update(self, version: int) -> MetadataUpdate:
        """An update of UpdateMetadata ``version`` applied topic by topic, published by its
        ``finish`` (see :mod:`kmeta.metadata.update`)."""
        return MetadataUpdate(self, version)

    def log_applied(
        self, snap: MetadataSnapshot, request: UpdateMetadataRequest, correlation_id: int, topics: int, deleted: int,
        brokers: int,
    ) -> None:  # fmt: skip
        log.debug(
            "metadata v%d from controller %s epoch %s (correlation id %d): %d topics, %d deleted "
            "partitions, %d live brokers",
            snap.version, request.controller_id, request.controller_epoch, correlation_id,
            topics, deleted, brokers,
        )  # fmt: skip

    def live_brokers_of(
        self, live: Sequence[UpdateMetadataBroker], version: int
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
    live: Iterable[UpdateMetadataBroker], version: int
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


def _topic_groups(
    request: UpdateMetadataRequest, version: int
) -> list[tuple[str, uuid.UUID | None, Sequence[UpdateMetadataPartitionState], PushedConfigs]]:
    """(topic, topic id or None, partition states, pushed configs) per topic, in request order.

    v0-4 list partitions ungrouped with their topic name; grouping keeps each topic's order,
    which is all that matters (states of different topics do not interact).
    """
    if version >= 5:
        return [
            (ts.topic_name, ts.topic_id if version >= 7 else None, ts.partition_states,
             ts.kmeta_topic_configs if version >= 6 else NOT_SENT)
            for ts in request.topic_states
        ]
    grouped: dict[str, list[UpdateMetadataPartitionState]] = {}
    for p in request.ungrouped_partition_states:
        grouped.setdefault(p.topic_name, []).append(p)
    return [(name, None, parts, NOT_SENT) for name, parts in grouped.items()]
