"""ControllerHost: what a collaborator of the KafkaController may use, as a typed seam.

Collaborators (broker lifecycle, deletion, replica elections, reassignments, configs, ACLs)
are handed the controller as this protocol, not as the class: the state, the store, the
request batch (``send``) and the propagation barrier, and the one way to queue an event
(``enqueue``), the metrics. KafkaController satisfies it structurally.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, MutableSet
from typing import Protocol, TypeVar

from kmeta.controller.channel.barrier import Barrier
from kmeta.controller.channel.channel_manager import Callback
from kmeta.controller.channel.request_batch import ControllerRequests
from kmeta.controller.config import ControllerConfig
from kmeta.controller.metrics import ControllerMetrics
from kmeta.controller.model import ControllerContext, PartitionRegistration, TopicInfo
from kmeta.controller.store.cluster_store import ClusterStore
from kmeta.metadata.model import TopicPartitionKey

T = TypeVar("T")


class ControllerHost(Protocol):
    config: ControllerConfig
    state: ControllerContext
    store: ClusterStore
    metrics: ControllerMetrics

    @property
    def barriers(self) -> MutableSet[Barrier]: ...

    def enqueue(self, name: str, fn: Callable[[], T]) -> asyncio.Future[T]:
        """Queue a controller event; the future gets fn's result once its writes are durable."""

    def reachable(self, broker_id: int) -> bool:
        """Alive, with a channel, and no fault dropping its requests."""

    def say_once(self, *key: object) -> bool:
        """True the first time ``key`` is seen (to log a retried refusal once)."""

    def send(
        self,
        requests: ControllerRequests,
        *,
        barrier: Barrier | None = None,
        stop_callback: Callback | None = None,
    ) -> list[int]:
        """Send ``requests`` as one batch; returns the brokers an UpdateMetadata went to.
        ``barrier`` is acknowledged by their answers; ``stop_callback`` runs on every
        StopReplica answer."""

    def encode_update_metadata(self, topics: list[TopicInfo]) -> None:
        """Encode (or check) these topics' shared UpdateMetadata blocks now, so that a full
        update later only splices them."""

    def persist_partitions(
        self, changed: dict[TopicPartitionKey, PartitionRegistration], write: bool = True
    ) -> None:
        """Set ``changed`` in memory and (``write``) in the store's open transaction."""

    def propagation_targets(self, targets: list[int], forwarder: int | None) -> set[int]:
        """The brokers an admin answer waits for (all, or the forwarding one)."""
