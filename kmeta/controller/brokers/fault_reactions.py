"""What the controller does when an injected fault (:mod:`kmeta.controller.channel.faults`) changes.

A fault that starts dropping a broker's requests releases the barriers waiting on that
broker (its acknowledgements will not come); the end of a drop sends the broker everything
(as after its registration) in a ``FaultCleared`` event, since what it missed was dropped.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Protocol

from kmeta.controller.brokers.lifecycle import live_partitions_on
from kmeta.controller.channel.channel_manager import ControlResponse
from kmeta.controller.channel.faults import Fault
from kmeta.controller.channel.request_batch import ControllerRequests
from kmeta.controller.host import ControllerHost
from kmeta.metadata.model import TopicPartitionKey


class Channels(Protocol):
    def has_broker(self, broker_id: int) -> bool: ...


class PendingDeletions(Protocol):
    def stops_for(
        self, names: Iterable[str] | None = None, broker_id: int | None = None
    ) -> list[tuple[list[int], TopicPartitionKey, bool]]: ...

    def stop_replica_answered(self, response: ControlResponse, broker_id: int) -> None: ...


class FaultReactions:
    def __init__(
        self, host: ControllerHost, channels: Channels, deletion: PendingDeletions
    ) -> None:
        self.host = host
        self.channels = channels
        self.deletion = deletion

    def changed(self, broker_id: int, old: Fault | None, new: Fault | None) -> None:
        """The FaultInjector's change hook."""
        if new is not None and new.drop:
            for barrier in list(self.host.barriers):
                barrier.broker_gone(broker_id)
        elif old is not None and old.drop:
            resync = functools.partial(self._resync, broker_id)
            self.host.enqueue("FaultCleared", resync)

    def _resync(self, broker_id: int) -> None:
        """Send a broker everything (as after its registration): what it missed was dropped."""
        state = self.host.state
        if not state.is_alive(broker_id) or not self.channels.has_broker(broker_id):
            return
        hosted = live_partitions_on(state, broker_id)
        self.host.send(
            ControllerRequests(
                update_metadata_to=[broker_id],
                leader_and_isr=[([broker_id], tp, False) for tp in hosted],
                stop_replica=self.deletion.stops_for(broker_id=broker_id),
                full_update_metadata=True,
            ),
            stop_callback=self.deletion.stop_replica_answered,
        )
