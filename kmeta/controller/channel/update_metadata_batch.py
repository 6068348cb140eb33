"""UpdateMetadataBatch: the UpdateMetadata part of a ControllerBrokerRequestBatch.

Kafka's AbstractControllerBrokerRequestBatch keeps the UpdateMetadata brokers and partitions
apart from LeaderAndIsr and StopReplica (updateMetadataRequestBrokerSet and
updateMetadataRequestPartitionInfoMap, sent by sendUpdateMetadataRequests); so does this
class, which the batch owns and calls. Partition states are read from the cluster state when
sent, and the body is spliced from the per-topic blocks of
:class:`UpdateMetadataBlocks` (``ctx.blocks``, kept between batches), shared by every
target broker: only the head (the broker epoch) differs per broker. Each topic state carries
the topic's config overrides (kmeta's tagged field ``kmeta_topic_configs``), and the request
the ACL set (``kmeta_acls``) when asked or FULL, and the SCRAM credentials when the
controller has any.

Encoded topic blocks (:class:`UpdateMetadataBlocks`): each topic's UpdateMetadata entry, encoded once and shared.

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
:mod:`kmeta.protocol.codec.splice` (the very bytes the whole-message encoder writes), and the part
after the broker epoch is one object shared by every broker's request.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from kmeta.controller.channel.channel_manager import Callback, ControllerChannelManager
from kmeta.controller.model import ControllerContext, PartitionRegistration, TopicInfo
from kmeta.metadata.model import LEADER_DURING_DELETE, TopicPartitionKey
from kmeta.net.security.scram import MECHANISM_IDS, ScramCredentials
from kmeta.protocol.codec.splice import Splice
from kmeta.protocol.messages import update_metadata as um

UPDATE_METADATA_VERSION = 8
#: UpdateMetadata v8 Type (KIP-866): INCREMENTAL merges, FULL replaces the broker's partition set
UM_INCREMENTAL = 1
UM_FULL = 2


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


class UpdateMetadataContext(Protocol):
    """What the UpdateMetadata part reads of its batch's context (the request batch's
    BatchContext, which holds this module's batch: typed here so it need not be imported)."""

    @property
    def state(self) -> ControllerContext: ...
    @property
    def channel(self) -> ControllerChannelManager: ...
    @property
    def controller_epoch(self) -> int: ...
    @property
    def controller_id(self) -> int: ...
    @property
    def credentials(self) -> ScramCredentials | None: ...
    @property
    def blocks(self) -> UpdateMetadataBlocks: ...


class UpdateMetadataBatch:
    def __init__(self, ctx: UpdateMetadataContext) -> None:
        self.ctx = ctx
        self._brokers: set[int] = set()
        #: topic -> its partition indexes to send (insertion-ordered, no repeats)
        self._partitions: dict[str, dict[int, None]] = {}
        self._full = False
        #: the UpdateMetadata carries the whole ACL set (always on a FULL one)
        self._with_acls = False

    def is_empty(self) -> bool:
        # only target brokers count: partitions or ACLs without a live broker send nothing
        return not self._brokers

    def clear(self) -> None:
        self._brokers.clear()
        self._partitions.clear()
        self._full = False
        self._with_acls = False

    # -- adding ---------------------------------------------------------------------------------
    def add(
        self,
        broker_ids: Iterable[int],
        partitions: Iterable[TopicPartitionKey],
        topics: Iterable[str] = (),
    ) -> None:
        """``broker_ids`` get the live brokers plus ``partitions`` and every partition of
        ``topics`` (none: a brokers-only update).

        A topic whose every partition is added goes out as its shared block
        (:class:`UpdateMetadataBlocks`), the others partition by partition."""
        out = self._partitions
        for name, index in partitions:
            indexes = out.get(name)
            if indexes is None:
                indexes = out[name] = {}
            indexes[index] = None
        for name in topics:
            info = self.ctx.state.topics.get(name)
            if info is not None:
                out.setdefault(name, {}).update(dict.fromkeys(info.partitions))
        self._brokers.update(b for b in broker_ids if self.ctx.state.is_alive(b))

    def add_full(self, broker_ids: Iterable[int]) -> None:
        """``broker_ids`` get every partition (a FULL update replaces all they hold)."""
        self._full = True
        self._brokers.update(b for b in broker_ids if self.ctx.state.is_alive(b))

    def add_acls(self) -> None:
        self._with_acls = True

    # -- what the request carries besides partition states ---------------------------------------
    def live_brokers(self) -> tuple[um.UpdateMetadataBroker, ...]:
        out = []
        for b in sorted(self.ctx.state.brokers.values(), key=lambda b: b.broker_id):
            if b.alive:
                out.append(
                    um.UpdateMetadataBroker(
                        id=b.broker_id,
                        endpoints=tuple(
                            um.UpdateMetadataEndpoint(
                                ep.port, ep.host, ep.listener, ep.security_protocol
                            )
                            for ep in b.listeners
                        ),
                        rack=b.rack,
                    )
                )
        return tuple(out)

    def _topic_configs(self, name: str) -> tuple[um.KmetaTopicConfig, ...] | None:
        """The topic's whole override set, on every topic state this controller sends (kmeta's
        tagged field: Kafka brokers skip it), so a full UpdateMetadata restores them all.
        No overrides: null (not on the wire; a FULL update reads it as none), or an empty
        list right after they were all removed (an incremental update must say so)."""
        state = self.ctx.state
        info = state.topics.get(name)
        if info is not None and info.configs:
            return tuple(um.KmetaTopicConfig(k, v) for k, v in sorted(info.configs.items()))
        return () if name in state.configs_cleared else None

    def _acls(self) -> tuple[um.KmetaAcl, ...]:
        """The whole ACL set, in kmeta's tagged field (Kafka brokers skip it): on every FULL
        UpdateMetadata (so a restarted or new broker gets it first) and after an ACL change."""
        return tuple(um.KmetaAcl(*b) for b in sorted(self.ctx.state.acls))

    def _credentials(self) -> tuple[um.KmetaScramCredential, ...] | None:
        credentials = self.ctx.credentials
        return None if credentials is None else tuple(
            um.KmetaScramCredential(
                user, MECHANISM_IDS[c.mechanism], c.salt, c.stored_key, c.server_key,
                c.iterations,
            )
            for user, c in credentials.items()
        )  # fmt: skip

    # -- encoding and sending -------------------------------------------------------------------
    def _topic_block(self, info: TopicInfo, alive: frozenset[int]) -> bytes:
        ctx = self.ctx
        deleting = info.name in ctx.state.deleting
        configs = self._topic_configs(info.name)
        return ctx.blocks.block(info, ctx.controller_epoch, alive, deleting, configs)

    def encode_topics(self, topics: Iterable[TopicInfo]) -> None:
        """Encode (or check) these topics' shared blocks now, so a full update later only
        splices them (a controller start does this in slices, see :mod:`kmeta.controller.slices`)."""
        alive = frozenset(self.ctx.state.live_broker_ids())
        for info in topics:
            self._topic_block(info, alive)

    def send(self, update_id: int, callback: Callback | None, um_type: int) -> list[int]:
        """Enqueue the UpdateMetadata to every target broker; returns them (sorted)."""
        if not self._brokers:
            return []
        ctx = self.ctx
        state = ctx.state
        blocks = ctx.blocks
        alive = frozenset(b.broker_id for b in state.brokers.values() if b.alive)
        epoch = ctx.controller_epoch
        topics = list(state.topics) if self._full else list(self._partitions)
        pieces: list[bytes] = [blocks.splice.count(len(topics))]
        count = 0
        for name in topics:
            info = state.topics[name]
            indexes = None if self._full else self._partitions[name]
            parts = info.partitions
            if indexes is None or len(indexes) == len(parts):
                pieces.append(self._topic_block(info, alive))
                count += len(parts)
            else:
                deleting, configs = name in state.deleting, self._topic_configs(name)
                key = (epoch, alive, deleting, info.topic_id, configs)
                some = ((p, parts[p]) for p in indexes)
                pieces.append(blocks.encode(name, info.topic_id, some, key))
                count += len(indexes)
        if self._full:
            blocks.keep_only(topics)
        acls = self._acls() if self._with_acls or um_type == UM_FULL else None
        live_brokers = self.live_brokers()
        pieces.append(
            blocks.splice.tail(
                live_brokers=live_brokers,
                type=um_type,
                kmeta_acls=acls,
                kmeta_scram_credentials=self._credentials(),
            )
        )
        # everything after the broker epoch is one object every broker's request shares
        shared = b"".join(pieces)
        del pieces
        targets = sorted(self._brokers)
        for broker_id in targets:
            broker_epoch = state.brokers[broker_id].epoch
            request = um.UpdateMetadataRequest(
                version=UPDATE_METADATA_VERSION,
                controller_id=ctx.controller_id,
                is_kraft_controller=True,
                type=um_type,
                controller_epoch=epoch,
                broker_epoch=broker_epoch,
                topic_states=(),  # (on the wire: ``encoded``)
                live_brokers=live_brokers,
                kmeta_acls=acls,
            )
            head = blocks.splice.head(
                controller_id=ctx.controller_id,
                is_kraft_controller=True,
                controller_epoch=epoch,
                broker_epoch=broker_epoch,
            )
            ctx.channel.send_request(
                broker_id,
                request,
                callback,
                update_id=update_id,
                topics=topics,
                partitions=count,
                encoded=(head, shared),
            )
        return targets
