"""Encoded topic blocks: each topic's UpdateMetadata entry, encoded once and shared.

A full UpdateMetadata at 1M partitions is ~50 MB, and building it partition by partition took
seconds of Python on every controller restart and broker return. The same topic entry goes
to every broker, and most topics do not change between two full pushes, so (as Kafka's
KAFKA-7186 / KAFKA-7537: one payload, not one per broker) each topic's
``UpdateMetadataTopicState`` is encoded once and kept with what its bytes depend on:

* the topic's partition states, kept as a tuple and compared to the current ones (tuple
  comparison tests identity first, so an unchanged topic is a C-level scan of ~1000 pointers,
  and states replaced by equal ones, as after a reload from the store, still match);
* the controller epoch, the live broker set (offline replicas), whether the topic is being
  deleted (leader -2), its id and config overrides.

Any difference re-encodes that topic alone. Bodies are spliced from the blocks with
:mod:`kmeta.protocol.splice` (the very bytes the whole-message encoder writes), and the part
after the broker epoch is one object shared by every broker's request.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from kmeta.controller.model import PartitionRegistration, TopicInfo
from kmeta.metadata.model import LEADER_DURING_DELETE
from kmeta.protocol.messages import update_metadata as um
from kmeta.protocol.splice import Splice

_INDEX = struct.Struct(">i")

#: what a topic's block depends on beside its partition states: (controller epoch, live
#: brokers, deleting, topic id, config overrides as sent)
Configs = tuple[um.KmetaTopicConfig, ...] | None
BlockKey = tuple[int, frozenset[int], bool, uuid.UUID, Configs]


@dataclass(slots=True)
class _Block:
    key: BlockKey
    indexes: tuple[int, ...]
    states: tuple[PartitionRegistration, ...]
    body: bytes


class UpdateMetadataBlocks:
    """The encoded ``UpdateMetadataTopicState`` of every topic a whole-topic update sent."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.splice: Splice = um.REQUEST.splice(version, "topic_states")
        #: a topic's entry laid out around its partitions
        self.topic: Splice = self.splice.inner("partition_states")
        if self.topic.leading != "partition_index":
            raise ValueError(f"UpdateMetadata v{version}: partitions are not grouped by topic")
        self._blocks: dict[str, _Block] = {}
        #: blocks reused and encoded since start (tests and the bench read them)
        self.hits = 0
        self.encoded = 0

    def __len__(self) -> int:
        return len(self._blocks)

    def block(
        self,
        info: TopicInfo,
        controller_epoch: int,
        alive: frozenset[int],
        deleting: bool,
        configs: Configs,
    ) -> bytes:
        """The whole topic's entry, from the cache while nothing it depends on changed."""
        parts = info.partitions
        indexes, states = tuple(parts), tuple(parts.values())
        key: BlockKey = (controller_epoch, alive, deleting, info.topic_id, configs)
        cached = self._blocks.get(info.name)
        if (
            cached is not None
            and cached.key == key
            and cached.states == states
            and cached.indexes == indexes
        ):
            self.hits += 1
            return cached.body
        body = self.encode(info.name, info.topic_id, zip(indexes, states, strict=True), key)
        self._blocks[info.name] = _Block(key, indexes, states, body)
        self.encoded += 1
        return body

    def encode(
        self,
        name: str,
        topic_id: uuid.UUID,
        parts: Iterable[tuple[int, PartitionRegistration]],
        key: BlockKey,
    ) -> bytes:
        """One topic's entry for ``parts`` (not cached: a part of a topic, or a new block).

        A topic's partitions share a few state objects (see ``AdminManager.create_topics``),
        and a partition's entry is its index then bytes that depend only on its state: each
        distinct state is encoded once (:meth:`Splice.element_rest`) and the entry is joined
        from the indexes and those bytes, the very bytes the element encoder writes."""
        controller_epoch, alive, deleting, _, configs = key
        topic = self.topic
        rests: dict[int, bytes] = {}  # id(state) -> its bytes (the states outlive this call)
        pack = _INDEX.pack
        out: list[bytes] = []
        append = out.append
        n = 0
        for index, st in parts:
            rest = rests.get(id(st))
            if rest is None:
                rest = rests[id(st)] = topic.element_rest(
                    self._partition(st, controller_epoch, alive, deleting)
                )
            append(pack(index))
            append(rest)
            n += 1
        return b"".join((
            topic.head(topic_name=name, topic_id=topic_id), topic.count(n), *out,
            topic.tail(kmeta_topic_configs=configs),
        ))  # fmt: skip

    @staticmethod
    def _partition(
        st: PartitionRegistration, controller_epoch: int, alive: frozenset[int], deleting: bool
    ) -> um.UpdateMetadataPartitionState:
        replicas = st.replicas
        offline = () if alive.issuperset(replicas) else tuple(r for r in replicas if r not in alive)
        leader = LEADER_DURING_DELETE if deleting else st.leader
        return um.UpdateMetadataPartitionState(
            "", 0, controller_epoch, leader, st.leader_epoch, st.isr, st.partition_epoch,
            replicas, offline,
        )  # fmt: skip

    def keep_only(self, names: Iterable[str]) -> None:
        """Forget the blocks of topics not in ``names`` (deleted since)."""
        keep = set(names)
        for name in [n for n in self._blocks if n not in keep]:
            del self._blocks[name]
