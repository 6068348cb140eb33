"""``MetadataResponseHandler``: a Metadata answer in, the next ``Cluster`` out.

Kafka does this in ``Metadata.handleMetadataResponse`` and ``updateLatestMetadata``; it is a
collaborator of ``Metadata`` here so the rules that decide what an answer *means* (leader-epoch
fencing, partial answers merged into the old view, which errors make the view stale) read
apart from the bookkeeping of when to ask.

* Leader-epoch fencing: partition metadata with an older leader epoch than the last seen is
  not applied (the cached partition is kept); a changed topic id resets the epoch. Answers
  older than v9 carry no reliable epochs, so nothing is fenced and nothing remembered.
* A partial answer (only the new topics) keeps what it did not cover (Kafka's ``mergeWith``).
* A topic or partition error from ``INVALID_METADATA_ERRORS``, or a partition whose leader is
  not among the answer's brokers, calls ``on_stale``: the view is known to be out of date.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Set

from kmeta.client.cluster import Cluster, PartitionInfo, partition_from_response
from kmeta.metadata.model import TopicPartition
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import metadata as md

#: Error codes whose Java exceptions extend ``InvalidMetadataException``: the cached metadata
#: is stale and a refresh is due.
INVALID_METADATA_ERRORS: frozenset[int] = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.LISTENER_NOT_FOUND,
        74,  # FENCED_LEADER_EPOCH
        75,  # UNKNOWN_LEADER_EPOCH
        78,  # OFFSET_NOT_AVAILABLE
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INCONSISTENT_TOPIC_ID,
    }
)

#: ``retain(topic, is_internal, now_ms)``: whether the client still wants ``topic``.
RetainTopic = Callable[[str, bool, int], bool]


def equivalent(old: Cluster, new: Cluster) -> bool:
    """Whether an update changed nothing a client acts on (KIP-951's backoff counts these)."""
    return (
        not old.is_bootstrap
        and old.nodes == new.nodes
        and old.partitions_by_topic == new.partitions_by_topic
        and old.topic_errors == new.topic_errors
    )


class MetadataResponseHandler:
    def __init__(self, retain: RetainTopic, on_stale: Callable[[], object]) -> None:
        self._retain = retain
        self._on_stale = on_stale
        self._last_seen_leader_epochs: dict[TopicPartition, int] = {}

    def last_seen_leader_epoch(self, tp: TopicPartition) -> int | None:
        return self._last_seen_leader_epochs.get(tp)

    def forget_epochs_except(self, kept: Set[str]) -> None:
        """Drop the epochs of topics no longer kept, so the map cannot outgrow the topics."""
        for tp in [tp for tp in self._last_seen_leader_epochs if tp.topic not in kept]:
            del self._last_seen_leader_epochs[tp]

    def handle(
        self, old: Cluster, response: md.MetadataResponse, is_partial: bool, now_ms: int
    ) -> Cluster:
        reliable_epochs = response.version >= 9  # older brokers did not propagate epochs reliably
        partitions: list[PartitionInfo] = []
        topic_ids: dict[str, uuid.UUID] = {}
        errors: dict[str, int] = {}
        internal: set[str] = set()
        in_response: set[str] = set()
        node_ids = {b.node_id for b in response.brokers}
        for t in response.topics:
            name = t.name
            if name is None:
                continue
            in_response.add(name)
            topic_id = t.topic_id if t.topic_id not in (None, ZERO_UUID) else None
            if not self._retain(name, t.is_internal, now_ms):
                continue
            old_topic_id = old.topic_ids.get(name) if topic_id is not None else None
            if topic_id is not None:
                topic_ids[name] = topic_id
            if t.is_internal:
                internal.add(name)
            if t.error_code != ErrorCode.NONE:
                errors[name] = t.error_code
                if t.error_code in INVALID_METADATA_ERRORS:
                    self._on_stale()
                continue
            for p in t.partitions:
                info = self._latest(
                    partition_from_response(name, p), reliable_epochs, topic_id, old_topic_id, old
                )
                if info is not None:
                    partitions.append(info)
                if p.error_code in INVALID_METADATA_ERRORS or p.leader_id not in node_ids:
                    self._on_stale()  # stale, or a partition without a known leader
        if is_partial:  # keep what the partial answer did not cover (Kafka's mergeWith)
            for name, parts in old.partitions_by_topic.items():
                if name not in in_response and self._retain(
                    name, name in old.internal_topics, now_ms
                ):
                    partitions.extend(parts)
                    if name in old.topic_ids:
                        topic_ids[name] = old.topic_ids[name]
                    if name in old.internal_topics:
                        internal.add(name)
            for name, code in old.topic_errors.items():
                if name not in in_response and name not in errors:
                    errors[name] = code
        return Cluster.of_response(response, partitions, topic_ids, errors, internal)

    def _latest(
        self,
        info: PartitionInfo,
        reliable_epochs: bool,
        topic_id: uuid.UUID | None,
        old_topic_id: uuid.UUID | None,
        old: Cluster,
    ) -> PartitionInfo | None:
        """The partition metadata to keep: the new one unless its leader epoch is older."""
        tp = info.tp
        epoch = info.leader_epoch
        if not reliable_epochs or epoch is None:
            self._last_seen_leader_epochs.pop(tp, None)
            return info.without_leader_epoch()
        current = self._last_seen_leader_epochs.get(tp)
        if topic_id is not None and topic_id != old_topic_id:
            self._last_seen_leader_epochs[tp] = epoch  # a re-created topic starts over
            return info
        if current is None or epoch >= current:
            self._last_seen_leader_epochs[tp] = epoch
            return info
        return old.partition(tp)  # fenced: keep what we had
