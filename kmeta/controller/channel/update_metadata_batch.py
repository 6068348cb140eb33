"""UpdateMetadataBatch: the UpdateMetadata part of a ControllerBrokerRequestBatch.

Kafka's AbstractControllerBrokerRequestBatch keeps the UpdateMetadata brokers and partitions
apart from LeaderAndIsr and StopReplica (updateMetadataRequestBrokerSet and
updateMetadataRequestPartitionInfoMap, sent by sendUpdateMetadataRequests); so does this
class, which the batch owns and calls. Partition states are read from the cluster state when
sent, and the body is spliced from the per-topic blocks of
:mod:`kmeta.controller.channel.topic_blocks` (``ctx.blocks``, kept between batches), shared by every
target broker: only the head (the broker epoch) differs per broker. Each topic state carries
the topic's config overrides (kmeta's tagged field ``kmeta_topic_configs``), and the request
the ACL set (``kmeta_acls``) when asked or FULL, and the SCRAM credentials when the
controller has any.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from kmeta.controller.channel.channel_manager import Callback, ControllerChannelManager
from kmeta.controller.channel.topic_blocks import UpdateMetadataBlocks
from kmeta.controller.model import ClusterState, TopicInfo
from kmeta.metadata.model import TopicPartitionKey
from kmeta.net.security.scram import MECHANISM_IDS, ScramCredentials
from kmeta.protocol.messages import update_metadata as um

UPDATE_METADATA_VERSION = 8
#: UpdateMetadata v8 Type (KIP-866): INCREMENTAL merges, FULL replaces the broker's partition set
UM_INCREMENTAL = 1
UM_FULL = 2


class UpdateMetadataContext(Protocol):
    """What the UpdateMetadata part reads of its batch's context (the request batch's
    BatchContext, which holds this module's batch: typed here so it need not be imported)."""

    @property
    def state(self) -> ClusterState: ...
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
        (:mod:`kmeta.controller.channel.topic_blocks`), the others partition by partition."""
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
        splices them (a controller start does this in slices, see :mod:`slices`)."""
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
