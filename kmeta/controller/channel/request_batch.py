"""ControllerBrokerRequestBatch: the requests one controller event sends, as one batch.

As Kafka's batch: the event adds partitions to LeaderAndIsr (per target broker),
UpdateMetadata (one partition set for a set of brokers) and StopReplica (per broker), then
``send_requests_to_brokers`` enqueues, per broker, LeaderAndIsr first, then UpdateMetadata,
then StopReplica, each stamped with the controller epoch and the target broker's epoch.
LeaderAndIsr partition states are read from the cluster state when added, UpdateMetadata ones
when sent (the same event, which adds and sends at once); a topic queued for deletion goes
out with leader -2 (LeaderDuringDelete) so brokers drop it. The UpdateMetadata part (its
brokers, partitions, ACLs, credentials and the spliced per-topic blocks) is its own class,
:class:`~kmeta.controller.channel.update_metadata_batch.UpdateMetadataBatch`; LeaderAndIsr
bodies are built from per-topic entries (:mod:`kmeta.controller.channel.leader_and_isr_blocks`);
a create adds its new topics whole (``leader_and_isr_topics``), not partition by partition.

:class:`BatchSender`: how the changes of a controller event go out as request batches.

Kafka's KafkaController keeps one ``ControllerBrokerRequestBatch`` and calls ``newBatch`` and
``sendRequestsToBrokers`` around each change. Here each ``send`` builds a batch over what the
controller holds at that moment: its state and epoch are replaced (at start, and on a reload
after a refused commit), so they are read through ``ControllerView`` on every send, never
kept. It also numbers the updates: every request one event sends carries the same update id,
by which the state-change log and the propagation tracker group them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kmeta.controller.channel.barrier import Barrier
from kmeta.controller.channel.channel_manager import Callback, ControllerChannelManager
from kmeta.controller.channel.leader_and_isr_blocks import (
    AddingRemoving,
    LeaderAndIsrBlocks,
    TopicParts,
    leader_and_isr_plans,
    live_leaders,
)

# (``X as X``: re-exported, since callers and tests import the control-request versions and
# UpdateMetadata types from the batch)
from kmeta.controller.channel.update_metadata_batch import UM_FULL as UM_FULL
from kmeta.controller.channel.update_metadata_batch import UM_INCREMENTAL as UM_INCREMENTAL
from kmeta.controller.channel.update_metadata_batch import (
    UPDATE_METADATA_VERSION as UPDATE_METADATA_VERSION,
)
from kmeta.controller.channel.update_metadata_batch import UpdateMetadataBatch, UpdateMetadataBlocks
from kmeta.controller.model import ControllerContext, PartitionRegistration, TopicInfo
from kmeta.metadata.model import TopicPartitionKey
from kmeta.net.security.scram import ScramCredentials
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.messages import leader_and_isr as lair
from kmeta.protocol.messages import stop_replica as sr
from kmeta.protocol.messages import update_metadata as um

LEADER_AND_ISR_VERSION = 7
STOP_REPLICA_VERSION = 4
#: StopReplica leader epoch that means "deleting" (Kafka's LeaderAndIsr.EpochDuringDelete)
EPOCH_DURING_DELETE = -2


#: (brokers, partition, is_new for LeaderAndIsr / delete for StopReplica)
Targets = Iterable[tuple[Iterable[int], TopicPartitionKey, bool]]


@dataclass(frozen=True, slots=True)
class ControllerRequests:
    """What one controller event asks of the brokers, built by the caller and sent as one batch
    by ``ControllerHost.send`` (Kafka's callers fill a ControllerBrokerRequestBatch with
    addLeaderAndIsrRequestForBrokers, addUpdateMetadataRequestForBrokers and
    addStopReplicaRequestForBrokers, then call sendRequestsToBrokers). Each broker gets its
    LeaderAndIsr first, then its UpdateMetadata, then its StopReplica."""

    #: a LeaderAndIsr partition state of each partition for each of its brokers
    leader_and_isr: Targets = ()
    #: LeaderAndIsr of every partition of these topics for each of its replicas (is_new: they
    #: were just created): built per topic, not per partition
    leader_and_isr_topics: Iterable[str] = ()
    new_topics: bool = False
    #: the brokers that get an UpdateMetadata (it always carries the live broker set) ...
    update_metadata_to: Iterable[int] = ()
    #: ... with these partitions' states
    update_metadata_partitions: Iterable[TopicPartitionKey] = ()
    #: ... and every partition of these topics (a create: no key per partition is made)
    update_metadata_topics: Iterable[str] = ()
    #: a FULL UpdateMetadata (KIP-866 type 2): every partition, whatever the field above says
    full_update_metadata: bool = False
    #: the UpdateMetadata carries the cluster's ACLs (a full one always does)
    with_acls: bool = False
    #: a StopReplica of each partition for each of its brokers
    stop_replica: Targets = ()

    def add_to(self, batch: ControllerBrokerRequestBatch) -> None:
        """Add these requests to a new batch, in Kafka's order."""
        if self.with_acls:
            batch.add_acls()
        for brokers, tp, is_new in self.leader_and_isr:
            batch.add_leader_and_isr(brokers, tp, is_new)
        for name in self.leader_and_isr_topics:
            batch.add_leader_and_isr_topic(name, self.new_topics)
        if self.full_update_metadata:
            batch.add_update_metadata_full(self.update_metadata_to)
        else:
            batch.add_update_metadata(
                self.update_metadata_to, self.update_metadata_partitions, self.update_metadata_topics
            )
        for brokers, tp, delete in self.stop_replica:
            batch.add_stop_replica(brokers, tp, delete)

    @property
    def update_metadata_type(self) -> int:
        return UM_FULL if self.full_update_metadata else UM_INCREMENTAL


@dataclass(slots=True)
class BatchContext:
    """What a batch reads from the controller when it sends."""

    state: ControllerContext
    channel: ControllerChannelManager
    controller_epoch: int
    #: this controller's node id; sent with is_kraft_controller (KIP-866), so brokers tell
    #: clients a live broker as the controller and forward admin requests to us (as KRaft)
    controller_id: int
    #: the partitions being reassigned (their adding/removing replicas go in LeaderAndIsr)
    reassigning: Mapping[TopicPartitionKey, AddingRemoving] = field(default_factory=dict)
    #: every UpdateMetadata carries the whole credential set (kmeta_scram_credentials), so a
    #: broker that (re)registers holds it from its first full update on
    credentials: ScramCredentials | None = None
    #: the encoded topic entries kept between batches (the controller's; else this batch's)
    blocks: UpdateMetadataBlocks = field(
        default_factory=lambda: UpdateMetadataBlocks(UPDATE_METADATA_VERSION)
    )
    lair_blocks: LeaderAndIsrBlocks = field(
        default_factory=lambda: LeaderAndIsrBlocks(LEADER_AND_ISR_VERSION)
    )


class ControllerBrokerRequestBatch:
    def __init__(self, ctx: BatchContext) -> None:
        self.ctx = ctx
        self._lair: dict[int, dict[TopicPartitionKey, tuple[PartitionRegistration, bool]]] = {}
        #: whole topics for LeaderAndIsr -> is_new
        self._lair_topics: dict[str, bool] = {}
        #: Kafka's updateMetadataRequestBrokerSet and ...PartitionInfoMap, and their sending
        self.update_metadata = UpdateMetadataBatch(ctx)
        self._stop: dict[int, dict[TopicPartitionKey, bool]] = {}

    def new_batch(self) -> None:
        if self._lair or self._lair_topics or not self.update_metadata.is_empty() or self._stop:
            raise RuntimeError("a new batch was started while the previous one was not sent")

    def is_empty(self) -> bool:
        return not (
            self._lair or self._lair_topics or not self.update_metadata.is_empty() or self._stop
        )

    # -- adding ---------------------------------------------------------------------------------
    def add_leader_and_isr(
        self, broker_ids: Iterable[int], tp: TopicPartitionKey, is_new: bool = False
    ) -> None:
        state = self.ctx.state
        st = state.topics[tp[0]].partitions[tp[1]]
        brokers = state.brokers
        for b in broker_ids:
            broker = brokers.get(b)
            if broker is not None and broker.alive:
                parts = self._lair.get(b)
                if parts is None:
                    parts = self._lair[b] = {}
                parts[tp] = (st, is_new)

    def add_leader_and_isr_topic(self, name: str, is_new: bool = False) -> None:
        """Every partition of ``name`` to each of its live replicas (read when sent)."""
        self._lair_topics[name] = is_new

    def add_update_metadata(
        self,
        broker_ids: Iterable[int],
        partitions: Iterable[TopicPartitionKey] = (),
        topics: Iterable[str] = (),
    ) -> None:
        """``broker_ids`` get the live brokers plus ``partitions`` and every partition of
        ``topics`` (none: a brokers-only update).

        A topic whose every partition is added goes out as its shared block
        (:class:`~kmeta.controller.channel.update_metadata_batch.UpdateMetadataBlocks`), the others partition by partition."""
        self.update_metadata.add(broker_ids, partitions, topics)

    def add_update_metadata_full(self, broker_ids: Iterable[int]) -> None:
        """``broker_ids`` get every partition (a FULL update replaces all they hold)."""
        self.update_metadata.add_full(broker_ids)

    def add_acls(self) -> None:
        """This batch's UpdateMetadata carries the cluster's whole ACL set."""
        self.update_metadata.add_acls()

    def add_stop_replica(
        self, broker_ids: Iterable[int], tp: TopicPartitionKey, delete: bool
    ) -> None:
        for b in broker_ids:
            if self.ctx.state.is_alive(b):
                self._stop.setdefault(b, {})[tp] = delete

    # -- sending --------------------------------------------------------------------------------
    def send_requests_to_brokers(
        self,
        update_id: int,
        um_callback: Callback | None = None,
        um_type: int = UM_INCREMENTAL,
        stop_callback: Callback | None = None,
    ) -> list[int]:
        """Enqueue everything added; returns the brokers an UpdateMetadata went to.

        ``stop_callback`` runs on every StopReplica answer (topic deletion counts them)."""
        try:
            self._send_leader_and_isr(update_id)
            return self.update_metadata.send(update_id, um_callback, um_type)
        finally:
            self._send_stop_replica(update_id, stop_callback)
            self._lair.clear()
            self._lair_topics.clear()
            self.update_metadata.clear()
            self._stop.clear()

    def _broker_epoch(self, broker_id: int) -> int:
        return self.ctx.state.brokers[broker_id].epoch

    def _topic_id(self, name: str) -> uuid.UUID:
        info = self.ctx.state.topics.get(name)
        return info.topic_id if info is not None else ZERO_UUID

    def _send_leader_and_isr(self, update_id: int) -> None:
        # Brokers that get the same partitions (every broker, when all hold all replicas) get
        # the same body after their own head (the broker epoch): built once for all of them.
        groups: list[tuple[dict[str, TopicParts], list[int]]] = []
        ctx = self.ctx
        for broker_id, plan in leader_and_isr_plans(
            ctx.state, self._lair, self._lair_topics
        ).items():
            for group_plan, members in groups:
                if group_plan == plan:
                    members.append(broker_id)
                    break
            else:
                groups.append((plan, [broker_id]))
        blocks = ctx.lair_blocks
        for plan, members in groups:
            leaders: set[int] = set()
            entries = [
                blocks.topic_entry(
                    name,
                    self._topic_id(name),
                    parts,
                    ctx.controller_epoch,
                    ctx.reassigning,
                    leaders,
                )
                for name, parts in plan.items()
            ]
            shared = blocks.body(entries, live_leaders(ctx.state, leaders))
            topics, count = list(plan), sum(len(parts) for parts in plan.values())
            for broker_id in members:
                epoch = self._broker_epoch(broker_id)
                request = lair.LeaderAndIsrRequest(
                    version=LEADER_AND_ISR_VERSION,
                    controller_id=ctx.controller_id,
                    is_kraft_controller=True,
                    controller_epoch=ctx.controller_epoch,
                    broker_epoch=epoch,
                    topic_states=(),  # (on the wire: ``encoded``)
                )
                head = blocks.head(ctx.controller_id, ctx.controller_epoch, epoch)
                ctx.channel.send_request(
                    broker_id, request, None, update_id=update_id, topics=topics,
                    partitions=count, encoded=(head, shared),
                )  # fmt: skip

    def live_brokers(self) -> tuple[um.UpdateMetadataBroker, ...]:
        return self.update_metadata.live_brokers()

    def encode_update_metadata(self, topics: Iterable[TopicInfo]) -> None:
        """Encode (or check) these topics' UpdateMetadata blocks now (see
        :meth:`UpdateMetadataBatch.encode_topics`)."""
        self.update_metadata.encode_topics(topics)

    def _send_stop_replica(self, update_id: int, callback: Callback | None) -> None:
        ctx = self.ctx
        for broker_id, parts in self._stop.items():
            by_topic: dict[str, list[sr.StopReplicaPartitionState]] = {}
            for (topic, p), delete in parts.items():
                by_topic.setdefault(topic, []).append(
                    sr.StopReplicaPartitionState(
                        partition_index=p,
                        leader_epoch=EPOCH_DURING_DELETE if delete else -1,
                        delete_partition=delete,
                    )
                )
            request = sr.StopReplicaRequest(
                version=STOP_REPLICA_VERSION,
                controller_id=ctx.controller_id,
                is_kraft_controller=True,
                controller_epoch=ctx.controller_epoch,
                broker_epoch=self._broker_epoch(broker_id),
                topic_states=tuple(
                    sr.StopReplicaTopicState(t, tuple(ps)) for t, ps in by_topic.items()
                ),
            )
            ctx.channel.send_request(
                broker_id,
                request,
                callback,
                update_id=update_id,
                topics=list(by_topic),
                partitions=len(parts),
            )


class ControllerView(Protocol):
    """What a batch reads of the controller when it is built (both are replaced over time)."""

    state: ControllerContext
    epoch: int


class BatchSender:
    def __init__(
        self,
        controller: ControllerView,
        channel: ControllerChannelManager,
        controller_id: int,
        reassigning: Mapping[TopicPartitionKey, AddingRemoving],
        credentials: ScramCredentials,
        blocks: UpdateMetadataBlocks,
    ) -> None:
        self._controller = controller
        self._channel = channel
        self._controller_id = controller_id
        self._reassigning = reassigning
        self._credentials = credentials
        self._blocks = blocks
        #: compiled once (its layouts are seconds of CPU when a 1M-partition rejoin made one
        #: per slice's batch); it keeps nothing between batches
        self._lair_blocks = LeaderAndIsrBlocks(LEADER_AND_ISR_VERSION)
        self._update_id = 0
        self._event_update_id = 0

    def _batch(self) -> ControllerBrokerRequestBatch:
        return ControllerBrokerRequestBatch(
            BatchContext(
                self._controller.state,
                self._channel,
                self._controller.epoch,
                self._controller_id,
                self._reassigning,
                self._credentials,
                self._blocks,
                self._lair_blocks,
            )
        )

    def send(
        self,
        requests: ControllerRequests,
        *,
        barrier: Barrier | None = None,
        stop_callback: Callback | None = None,
    ) -> list[int]:
        """Send ``requests`` as one batch; the brokers an UpdateMetadata went to."""
        batch = self._batch()
        batch.new_batch()
        requests.add_to(batch)
        if batch.is_empty():
            return []
        return batch.send_requests_to_brokers(
            self._update_id_for_event(),
            barrier.ack if barrier else None,
            requests.update_metadata_type,
            stop_callback,
        )

    def encode_update_metadata(self, topics: list[TopicInfo]) -> None:
        self._batch().encode_update_metadata(topics)

    def _update_id_for_event(self) -> int:
        if not self._event_update_id:
            self._update_id += 1
            self._event_update_id = self._update_id
        return self._event_update_id

    def event_done(self) -> int:
        """The update id of the event just processed (0: it sent nothing); the next event's
        requests get a new one."""
        update_id, self._event_update_id = self._event_update_id, 0
        return update_id
