"""BatchSender: how the changes of a controller event go out as request batches.

Kafka's KafkaController keeps one ``ControllerBrokerRequestBatch`` and calls ``newBatch`` and
``sendRequestsToBrokers`` around each change. Here each ``send`` builds a batch over what the
controller holds at that moment: its state and epoch are replaced (at start, and on a reload
after a refused commit), so they are read through ``ControllerView`` on every send, never
kept. It also numbers the updates: every request one event sends carries the same update id,
by which the state-change log and the propagation tracker group them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from kmeta.controller.channel.barrier import Barrier
from kmeta.controller.channel.channel_manager import Callback, ControllerChannelManager
from kmeta.controller.channel.leader_and_isr_blocks import AddingRemoving, LeaderAndIsrBlocks
from kmeta.controller.channel.request_batch import (
    LEADER_AND_ISR_VERSION,
    BatchContext,
    ControllerBrokerRequestBatch,
    ControllerRequests,
)
from kmeta.controller.channel.topic_blocks import UpdateMetadataBlocks
from kmeta.controller.model import ClusterState, TopicInfo
from kmeta.metadata.model import TopicPartitionKey
from kmeta.net.security.scram import ScramCredentials


class ControllerView(Protocol):
    """What a batch reads of the controller when it is built (both are replaced over time)."""

    state: ClusterState
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
