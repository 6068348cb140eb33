"""ControllerHost: what a collaborator of the KafkaController may use, as a typed seam.

Collaborators (replica elections, reassignments) are handed the controller as this protocol,
not as the class: the state, the store, the request batch (``_send``) and the propagation
barrier, and one way to queue an event. KafkaController satisfies it structurally.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, MutableSet
from typing import Any, Protocol

from kmeta.controller.barrier import Barrier
from kmeta.controller.config import ControllerConfig
from kmeta.controller.model import ClusterState, PartitionState, TopicPartition
from kmeta.controller.store import ControllerStore

#: (replicas to send to, partition, is_new / delete) as the batch takes them
Targets = Iterable[tuple[Iterable[int], TopicPartition, bool]]


class ControllerHost(Protocol):
    config: ControllerConfig
    state: ClusterState
    store: ControllerStore

    @property
    def barriers(self) -> MutableSet[Barrier]: ...

    def enqueue(self, name: str, fn: Callable[[], Any]) -> asyncio.Future[Any]: ...

    def _send(
        self,
        *,
        um_to: Iterable[int] = (),
        um_partitions: Iterable[TopicPartition] = (),
        lair: Targets = (),
        stop: Targets = (),
        um_type: int = 1,
        barrier: Barrier | None = None,
        stop_callback: Callable[[Any, int], None] | None = None,
        acls: bool = False,
    ) -> list[int]: ...

    def _persist_partitions(
        self, changed: dict[TopicPartition, PartitionState], write: bool = True
    ) -> None: ...

    def _propagation(self, targets: list[int], forwarder: int | None) -> set[int]: ...
