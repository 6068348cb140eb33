"""BrokerLifecycleManager: broker registration, sessions (heartbeats, expiry) and failure.

As KRaft's ClusterControlManager (registration, epochs) and BrokerHeartbeatManager
(sessions), with the ZooKeeper-mode controller's reactions (``onBrokerStartup``,
``onBrokerFailure``, controlled shutdown). Every method that changes state runs inside a
controller event; the heartbeat is answered at once (no event), as KRaft's.

It is handed the controller as :class:`ControllerHost` (state, store, the request batch, one
way to queue an event), the channel manager's broker set, the fault injector, and the two
collaborators that react to a registration, each through a one-method protocol.
"""

from __future__ import annotations

import logging
from typing import Protocol

from kmeta.controller.brokers.changes import offline_in_slices, rejoin_in_slices
from kmeta.controller.brokers.sessions import BrokerHeartbeatManager
from kmeta.controller.channel.barrier import Barrier
from kmeta.controller.channel.faults import FaultInjector
from kmeta.controller.channel.request_batch import ControllerRequests
from kmeta.controller.host import ControllerHost
from kmeta.controller.model import BrokerInfo, ControllerContext, PartitionRegistration
from kmeta.controller.topics.election import is_unclean, remove_replicas, unclean_allowed
from kmeta.metadata.model import Endpoint, TopicPartitionKey
from kmeta.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class BrokerChannels(Protocol):
    """The channel manager's broker set (a connection and a request queue per broker)."""

    def add_broker(self, broker_id: int, listeners: tuple[Endpoint, ...]) -> None: ...

    def remove_broker(self, broker_id: int) -> object: ...


class DeletionResumer(Protocol):
    def resume_for(self, broker_id: int) -> None:
        """Send the StopReplica(delete) that waited for ``broker_id`` to return."""


class ReassignmentListener(Protocol):
    def broker_registered(self, broker_id: int) -> None: ...


class BrokerLifecycleManager:
    def __init__(
        self,
        host: ControllerHost,
        channels: BrokerChannels,
        faults: FaultInjector,
        deletion: DeletionResumer,
        reassignments: ReassignmentListener,
    ) -> None:
        self.host = host
        self.channels = channels
        self.faults = faults
        self.deletion = deletion
        self.reassignments = reassignments
        self.sessions = BrokerHeartbeatManager(host, self._fence)

    def start(self) -> None:
        self.sessions.start()

    async def stop(self) -> None:
        await self.sessions.stop()

    def reloaded(self) -> None:
        """The controller reloaded its state after a refused commit."""
        self.sessions.reloaded()

    def heartbeat(self, broker_id: int, broker_epoch: int, peer: object) -> bool:
        """BrokerHeartbeat (no event): see :meth:`BrokerHeartbeatManager.heartbeat`."""
        return self.sessions.heartbeat(broker_id, broker_epoch, peer)

    def resume_sessions(self) -> None:
        """Controller start: brokers registered before it (the store holds them, as ZooKeeper
        held Kafka's registrations) keep their epochs with a fresh session and a channel."""
        for broker in self.host.state.brokers.values():
            if broker.alive:
                self.channels.add_broker(broker.broker_id, broker.listeners)
                self.sessions.renew(broker.broker_id)

    def register(
        self,
        broker_id: int,
        incarnation_id: str,
        listeners: tuple[Endpoint, ...],
        rack: str | None,
        peer: object = None,
        succeeds: tuple[int, str] | None = None,
        held_epoch: int = -1,
    ) -> tuple[ErrorCode, int]:
        """BrokerRegistration event: (error, broker epoch).

        As KRaft's ClusterControlManager.registerBroker: the same incarnation registering
        again keeps its epoch; another incarnation of an id whose session is still valid is
        refused with DUPLICATE_BROKER_REGISTRATION and nothing changes (a restarted broker
        retries until the old session expired; a second process with a live id never takes
        over its address and leaderships). Past the session, the old incarnation is ended and
        the new one registered in one event; the old one's partitions are failed and rejoined
        in the rejoin's slices (:func:`rejoin_in_slices`). ``peer``: the connection that owns the
        session from now on.

        ``succeeds``: (epoch, incarnation id) of the incarnation this one follows, as the
        broker's state dir recorded them (PreviousBrokerEpoch and kmeta's
        KmetaPreviousIncarnationId). The broker sends them only while it holds the dir's lock,
        which its previous process held until it died (kmeta.server.state_dir), so when they
        name exactly the registered incarnation, that one is gone: the new one is registered
        at once, the old ended in the same event, as past its session. Anything else (no
        state dir, an older epoch, another incarnation) waits out the session as before.
        Here kmeta differs from Kafka: KRaft's controller does not read PreviousBrokerEpoch
        to end a session (KIP-966 sends it after a clean shutdown, for the eligible leader
        replicas), so a Kafka broker restarted within broker.session.timeout.ms waits it
        out; kmeta's brokers keep no logs to recover, and that wait was most of a restart.

        ``held_epoch``: the epoch the broker holds now (PreviousBrokerEpoch): a new epoch is
        above it even on a store older than the cluster
        (:func:`kmeta.controller.store.cluster_store.epoch_after`)."""
        old = self.host.state.brokers.get(broker_id)
        if old is not None and old.alive and old.incarnation_id == incarnation_id:
            # the same process again (a retry, or its session on a new connection)
            self.sessions.registered(broker_id, peer)
            return ErrorCode.NONE, old.epoch
        if old is not None and old.alive and succeeds == (old.epoch, old.incarnation_id):
            log.info(
                "broker %d incarnation %s succeeds incarnation %s (epoch %d), whose process "
                "is gone (it held the broker's state dir): failing it now",
                broker_id, incarnation_id, old.incarnation_id, old.epoch,
            )  # fmt: skip
        elif old is not None and self.sessions.has_valid_session(broker_id):
            if self.host.say_once("duplicate", broker_id, incarnation_id, old.epoch):
                log.info(
                    "refusing the registration of broker %d incarnation %s: incarnation %s is "
                    "registered with epoch %d and its session is valid",
                    broker_id, incarnation_id, old.incarnation_id, old.epoch,
                )  # fmt: skip
            return ErrorCode.DUPLICATE_BROKER_REGISTRATION, -1
        bounced = old is not None and old.alive
        if bounced:
            # Bounced: the old incarnation ends here (its session, channel and what waited on
            # it); its partitions are failed and rejoined together, in the rejoin's slices
            # (one push of the final states, not two of 1M partitions, nor one event of them).
            self.sessions.end(broker_id)
            self.channels.remove_broker(broker_id)
            for waiting in list(self.host.barriers):
                waiting.broker_gone(broker_id)
        with self.host.store.transaction():
            epoch = self.host.store.next_broker_epoch(held_epoch)
            broker = BrokerInfo(broker_id, epoch, incarnation_id, listeners, rack, True)
            self.host.state.brokers[broker_id] = broker
            self.host.store.put_broker(broker)
        self.sessions.registered(broker_id, peer)
        self.channels.add_broker(broker_id, listeners)
        # Kafka's onBrokerStartup order: the others learn of the broker, the new broker gets
        # the full partition set (it serves clients from then on), then LeaderAndIsr for its
        # replicas (see rejoin_in_slices: in slices of topics, this event doing the first).
        self.host.send(
            ControllerRequests(
                update_metadata_to=[b for b in self.host.state.live_broker_ids() if b != broker_id],
            ),
        )
        rejoin_in_slices(
            self.host, broker_id, epoch, bounced, lambda: self.deletion.resume_for(broker_id)
        )
        self.reassignments.broker_registered(broker_id)
        log.info("broker %d registered with epoch %d", broker_id, epoch)
        return ErrorCode.NONE, epoch

    def _on_broker_failure(
        self,
        dead: list[int],
        barrier: Barrier | None = None,
    ) -> dict[TopicPartitionKey, PartitionRegistration]:
        """Fence ``dead``, re-elect and shrink ISRs; returns the changed partitions."""
        gone = set(dead)
        with self.host.store.transaction():
            for broker_id in dead:
                broker = self.host.state.brokers[broker_id]
                broker.alive = False
                self.host.store.put_broker(broker)
            changed: dict[TopicPartitionKey, PartitionRegistration] = {}
            deleting = self.host.state.deleting
            live = set(self.host.state.live_broker_ids()).__contains__
            unclean = 0
            for topic in self.host.state.topics.values():
                if topic.name in deleting:
                    continue  # no election for a topic being deleted (Kafka: ineligible)
                may = live if unclean_allowed(topic.configs) else None
                for p, st in topic.partitions.items():
                    if not gone.isdisjoint(st.replicas):
                        new = remove_replicas(st, gone.__contains__, may)
                        unclean += is_unclean(st, new)
                        changed[(topic.name, p)] = new
            self.host.persist_partitions(changed)
        self.host.metrics.unclean_elections(unclean)
        for broker_id in dead:
            self.sessions.end(broker_id)
            self.channels.remove_broker(broker_id)
            # (not ``barrier``: the caller's own is armed below, and must not resolve early)
            for waiting in list(self.host.barriers):
                if waiting is not barrier:
                    waiting.broker_gone(broker_id)
        lair = [(self.host.state.partition(tp).replicas, tp, False) for tp, st in changed.items()]
        targets = self.host.send(
            ControllerRequests(
                update_metadata_to=self.host.state.live_broker_ids(),
                update_metadata_partitions=changed,
                leader_and_isr=lair,
            ),
            barrier=barrier,
        )
        if barrier is not None:
            barrier.arm(b for b in targets if not self.faults.drops(b))
        return changed

    def _fence(self, broker_id: int) -> None:
        """A BrokerExpiration event found the broker's session expired: it is fenced now (not
        alive, written; its channel and session end), and the re-elections and ISR shrinks
        of its partitions follow in slices of topics (:mod:`kmeta.controller.slices`), this event doing the
        first. At 1M partitions they are seconds of work, which one event would hold the loop
        for (no heartbeat read: the livelock of issue 17). A partition not reached yet is as
        it was before the fencing (its leader unreachable) for that long; if the broker
        registers again meanwhile, the rest stop (it is back in their ISRs)."""
        state = self.host.state
        broker = state.brokers[broker_id]
        epoch = broker.epoch
        with self.host.store.transaction():
            broker.alive = False
            self.host.store.put_broker(broker)
        self.sessions.end(broker_id)
        self.channels.remove_broker(broker_id)
        for waiting in list(self.host.barriers):
            waiting.broker_gone(broker_id)
        offline_in_slices(self.host, broker_id, epoch)

    def controlled_shutdown(
        self, broker_id: int, broker_epoch: int, peer: object
    ) -> tuple[int, list[TopicPartitionKey], Barrier | None]:
        """ControlledShutdown event: (error code, partitions it still leads, barrier).

        Only from the session's owner (:meth:`BrokerHeartbeatManager.owns_session`): an epoch other than the
        registered one (-1, "unknown", too) would let anyone move a broker's leaders."""
        broker = self.host.state.brokers.get(broker_id)
        if broker is None or not broker.alive:
            return ErrorCode.BROKER_NOT_AVAILABLE, [], None
        if not self.sessions.owns_session(broker_id, broker_epoch, peer):
            return ErrorCode.STALE_BROKER_EPOCH, [], None
        # Kafka answers the replicated partitions (RF > 1) it could not move; a single
        # replica partition has nowhere to go and is not listed.
        remaining = [
            (t.name, p)
            for t in self.host.state.topics.values()
            for p, st in t.partitions.items()
            if st.leader == broker_id
            and len(st.replicas) > 1
            and not any(r != broker_id and self.host.state.is_alive(r) for r in st.isr)
        ]
        barrier = Barrier(self.host.barriers)
        # Kafka moves leaderships and shrinks ISRs here; the broker's exit then fences it.
        # We do both at once: the broker is about to stop anyway.
        self._on_broker_failure([broker_id], barrier)
        return 0, remaining, barrier


def live_partitions_on(state: ControllerContext, broker_id: int) -> list[TopicPartitionKey]:
    """The partitions with a replica on ``broker_id``, but those of topics being deleted."""
    deleting = state.deleting
    hosted = state.partitions_on(broker_id)
    return [tp for tp in hosted if tp[0] not in deleting] if deleting else hosted
