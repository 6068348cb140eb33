"""ControllerBrokerRequestBatch: the requests one controller event sends, as one batch.

As Kafka's batch: the event adds partitions to LeaderAndIsr (per target broker),
UpdateMetadata (one partition set for a set of brokers) and StopReplica (per broker), then
``send_requests_to_brokers`` enqueues, per broker, LeaderAndIsr first, then UpdateMetadata,
then StopReplica, each stamped with the controller epoch and the target broker's epoch.
Partition states are read from the cluster state when added; a topic queued for deletion goes
out with leader -2 (LeaderDuringDelete) so brokers drop it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kmeta.controller.channel_manager import Callback, ControllerChannelManager
from kmeta.controller.model import LEADER_DURING_DELETE, ClusterState, TopicPartition
from kmeta.protocol.messages import leader_and_isr as lair
from kmeta.protocol.messages import stop_replica as sr
from kmeta.protocol.messages import update_metadata as um

LEADER_AND_ISR_VERSION = 7
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 4
#: UpdateMetadata v8 Type (KIP-866): INCREMENTAL merges, FULL replaces the broker's partition set
UM_INCREMENTAL = 1
UM_FULL = 2
#: StopReplica leader epoch that means "deleting" (Kafka's LeaderAndIsr.EpochDuringDelete)
EPOCH_DURING_DELETE = -2


@dataclass(slots=True)
class BatchContext:
    """What a batch reads from the controller when it sends."""

    state: ClusterState
    channel: ControllerChannelManager
    controller_epoch: int
    #: this controller's node id; sent with is_kraft_controller (KIP-866), so brokers tell
    #: clients a live broker as the controller and forward admin requests to us (as KRaft)
    controller_id: int


class ControllerBrokerRequestBatch:
    def __init__(self, ctx: BatchContext) -> None:
        self.ctx = ctx
        self._lair: dict[int, dict[TopicPartition, tuple[Any, bool]]] = {}
        self._um_brokers: set[int] = set()
        self._um_partitions: dict[TopicPartition, Any] = {}
        self._stop: dict[int, dict[TopicPartition, bool]] = {}

    def new_batch(self) -> None:
        if self._lair or self._um_brokers or self._stop:
            raise RuntimeError("a new batch was started while the previous one was not sent")

    def is_empty(self) -> bool:
        return not (self._lair or self._um_brokers or self._stop)

    # -- adding ---------------------------------------------------------------------------------
    def add_leader_and_isr(
        self, broker_ids: Iterable[int], tp: TopicPartition, is_new: bool = False
    ) -> None:
        st = self.ctx.state.partition(tp)
        for b in broker_ids:
            if self.ctx.state.is_alive(b):
                self._lair.setdefault(b, {})[tp] = (st, is_new)

    def add_update_metadata(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition] = ()
    ) -> None:
        """``broker_ids`` get the live brokers plus ``partitions`` (none: a brokers-only update)."""
        state = self.ctx.state
        epoch = self.ctx.controller_epoch
        for tp in partitions:
            st = state.partition(tp)
            leader = LEADER_DURING_DELETE if tp[0] in state.deleting else st.leader
            self._um_partitions[tp] = um.UpdateMetadataPartitionState(
                topic_name=tp[0],
                partition_index=tp[1],
                controller_epoch=epoch,
                leader=leader,
                leader_epoch=st.leader_epoch,
                isr=st.isr,
                zk_version=st.partition_epoch,
                replicas=st.replicas,
                offline_replicas=tuple(state.offline_replicas(st)),
            )
        self._um_brokers.update(b for b in broker_ids if state.is_alive(b))

    def add_stop_replica(self, broker_ids: Iterable[int], tp: TopicPartition, delete: bool) -> None:
        for b in broker_ids:
            if self.ctx.state.is_alive(b):
                self._stop.setdefault(b, {})[tp] = delete

    # -- sending --------------------------------------------------------------------------------
    def send_requests_to_brokers(
        self, update_id: int, um_callback: Callback | None = None, um_type: int = UM_INCREMENTAL
    ) -> list[int]:
        """Enqueue everything added; returns the brokers an UpdateMetadata went to."""
        try:
            self._send_leader_and_isr(update_id)
            return self._send_update_metadata(update_id, um_callback, um_type)
        finally:
            self._send_stop_replica(update_id)
            self._lair.clear()
            self._um_brokers.clear()
            self._um_partitions.clear()
            self._stop.clear()

    def _broker_epoch(self, broker_id: int) -> int:
        return self.ctx.state.brokers[broker_id].epoch

    def _topic_id(self, name: str) -> uuid.UUID:
        info = self.ctx.state.topics.get(name)
        return info.topic_id if info is not None else uuid.UUID(int=0)

    def _send_leader_and_isr(self, update_id: int) -> None:
        ctx = self.ctx
        for broker_id, parts in self._lair.items():
            by_topic: dict[str, list[Any]] = {}
            leaders: set[int] = set()
            for (topic, p), (st, is_new) in parts.items():
                leaders.add(st.leader)
                by_topic.setdefault(topic, []).append(
                    lair.LeaderAndIsrPartitionState(
                        partition_index=p,
                        controller_epoch=ctx.controller_epoch,
                        leader=st.leader,
                        leader_epoch=st.leader_epoch,
                        isr=st.isr,
                        partition_epoch=st.partition_epoch,
                        replicas=st.replicas,
                        is_new=is_new,
                    )
                )
            live_leaders = []
            for leader in sorted(leaders):
                broker = ctx.state.brokers.get(leader)
                ep = broker.endpoint(None) if broker is not None and broker.alive else None
                if ep is not None:
                    live_leaders.append(lair.LeaderAndIsrLiveLeader(leader, ep.host, ep.port))
            request = lair.LeaderAndIsrRequest(
                version=LEADER_AND_ISR_VERSION,
                controller_id=ctx.controller_id,
                is_kraft_controller=True,
                controller_epoch=ctx.controller_epoch,
                broker_epoch=self._broker_epoch(broker_id),
                type=0,
                topic_states=tuple(
                    lair.LeaderAndIsrTopicState(t, self._topic_id(t), tuple(ps))
                    for t, ps in by_topic.items()
                ),
                live_leaders=tuple(live_leaders),
            )
            ctx.channel.send_request(
                broker_id,
                request,
                None,
                update_id=update_id,
                topics=list(by_topic),
                partitions=len(parts),
            )

    def live_brokers(self) -> tuple[Any, ...]:
        out = []
        for b in sorted(self.ctx.state.brokers.values(), key=lambda b: b.broker_id):
            if b.alive:
                out.append(
                    um.UpdateMetadataBroker(
                        id=b.broker_id,
                        endpoints=tuple(
                            um.UpdateMetadataEndpoint(
                                ep.port, ep.host, ep.name, ep.security_protocol
                            )
                            for ep in b.listeners
                        ),
                        rack=b.rack,
                    )
                )
        return tuple(out)

    def _send_update_metadata(
        self, update_id: int, callback: Callback | None, um_type: int
    ) -> list[int]:
        if not self._um_brokers:
            return []
        ctx = self.ctx
        by_topic: dict[str, list[Any]] = {}
        for (topic, _), ps in self._um_partitions.items():
            by_topic.setdefault(topic, []).append(ps)
        topic_states = tuple(
            um.UpdateMetadataTopicState(t, self._topic_id(t), tuple(ps))
            for t, ps in by_topic.items()
        )
        base = um.UpdateMetadataRequest(
            version=UPDATE_METADATA_VERSION,
            controller_id=ctx.controller_id,
            is_kraft_controller=True,
            type=um_type,
            controller_epoch=ctx.controller_epoch,
            topic_states=topic_states,
            live_brokers=self.live_brokers(),
        )
        topics = list(by_topic)
        targets = sorted(self._um_brokers)
        for broker_id in targets:
            ctx.channel.send_request(
                broker_id,
                base._replace(broker_epoch=self._broker_epoch(broker_id)),
                callback,
                update_id=update_id,
                topics=topics,
                partitions=len(self._um_partitions),
            )
        return targets

    def _send_stop_replica(self, update_id: int) -> None:
        ctx = self.ctx
        for broker_id, parts in self._stop.items():
            by_topic: dict[str, list[Any]] = {}
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
                None,
                update_id=update_id,
                topics=list(by_topic),
                partitions=len(parts),
            )
