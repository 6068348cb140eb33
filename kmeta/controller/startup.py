"""ControllerStartup: the Startup event, what a controller does once it took over.

Kafka's ``onControllerFailover``: resume from the store and push everything. Brokers
registered before the restart stay registered (the store holds them, as ZooKeeper held
Kafka's broker registrations) with their epochs and a fresh session; one that died meanwhile
expires after the session timeout. As Kafka, the live brokers first get the full partition
set with the live brokers (``sendUpdateMetadataRequest``), spliced from the topic blocks
encoded before the event, then LeaderAndIsr for the partitions they host (the replica state
machine's startup, in slices after the event; each broker's once it registered here, and only
the topics it does not hold as stored: :mod:`kmeta.controller.brokers.startup_resync`), all
stamped with the new controller epoch, which fences any request of the previous controller.

(Apart from :class:`KafkaController`, which wires it: the sequence reads the controller only
through :class:`ControllerHost` and the collaborators it resumes.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kmeta.controller.brokers.lifecycle import BrokerLifecycleManager
from kmeta.controller.brokers.startup_resync import StartupResync
from kmeta.controller.channel.request_batch import ControllerRequests
from kmeta.controller.host import ControllerHost
from kmeta.controller.slices import in_slices
from kmeta.controller.store.cluster_store import STORE_RETRY_S
from kmeta.controller.topics.deletion import TopicDeletionManager
from kmeta.controller.topics.reassignment import ReassignmentManager

#: (the controller's logger: "controller startup failed" keeps the name it was logged under)
log = logging.getLogger("kmeta.controller.controller")


class ControllerStartup:
    """Queues the Startup event (:meth:`begin`) and, once it is durable, calls ``on_active``
    and starts what waits for it (the resync's pushes, the reassignments)."""

    def __init__(
        self,
        host: ControllerHost,
        brokers: BrokerLifecycleManager,
        deletion: TopicDeletionManager,
        resync: StartupResync,
        reassignments: ReassignmentManager,
        on_active: Callable[[], None],
    ) -> None:
        self.host = host
        self.brokers = brokers
        self.deletion = deletion
        self.resync = resync
        self.reassignments = reassignments
        self.on_active = on_active

    def begin(self) -> None:
        """The Startup event, after its full update's topic blocks were encoded in slices of
        topics (:mod:`kmeta.controller.slices`: with 1M partitions that is seconds of work,
        which one event would hold the loop for), then its LeaderAndIsr to each broker as it
        registers here, only for the topics whose digest differs
        (:mod:`kmeta.controller.brokers.startup_resync`). Again after STORE_RETRY_S if it is
        refused (the blocks are then already encoded). Once it is durable the controller is
        active: an admin request queued after that comes after Startup in the event order."""
        host = self.host

        def done(future: asyncio.Future[Any]) -> None:
            if future.cancelled():
                return
            if future.exception() is not None:
                log.error("controller startup failed (%s); retrying", future.exception())
                asyncio.get_running_loop().call_later(STORE_RETRY_S, self.begin)
                return
            self.on_active()
            self.resync.started()
            self.reassignments.resume()

        in_slices(
            host,
            "StartupEncodeUpdateMetadata",
            list(host.state.topics),
            host.encode_update_metadata,
            then=lambda: host.enqueue("Startup", self._on_startup).add_done_callback(done),
        )

    def _on_startup(self) -> None:
        """The event (Kafka's onControllerFailover, see the module docstring)."""
        self.brokers.resume_sessions()
        self.host.send(
            ControllerRequests(
                update_metadata_to=self.host.state.live_broker_ids(),
                full_update_metadata=True,
            ),
        )
        self.deletion.resume()  # Kafka resumes the topics still under /admin/delete_topics
