"""KafkaController: cluster state, broker liveness and the events that change them.

Every change happens in one controller event (see :mod:`event_manager`), in this order: the
state is changed in memory, committed to the store (fsynced), and only then are the requests
that carry it enqueued on the channel manager, so nothing a broker or client has seen can be
lost by a crash. Admin answers wait on a :class:`Barrier` of UpdateMetadata acknowledgements.

A commit that fails (:class:`StorageError`: disk full, I/O error, read-only file system)
refuses the events that wrote: their requests are dropped unsent (the channel manager holds
them until the commit) and the state is reloaded from the store (:meth:`_rolled_back`), which
is correct for every event kind however it changed memory in place. Their requests are
answered KAFKA_STORAGE_ERROR; the controller keeps serving, and writes again once it can.

What is sent when (Kafka's ZooKeeper-mode controller):
* startup (failover): every stored broker gets the full partition set (UpdateMetadata FULL);
* broker registration: the new broker gets the full partition set and LeaderAndIsr for its
  replicas, the others a brokers-only update (plus partitions whose ISR/leader changed);
* broker death or controlled shutdown: leaders re-elected from the ISR, ISR shrunk, offline
  replicas set; the affected partitions go to all live brokers;
* topic creation and partition addition: the new partitions to all live brokers;
* topic deletion (:mod:`deletion`): leader -2 to all live brokers, StopReplica(delete) to the
  replicas, removal once every replica acknowledged (a dead one's waits for its return);
* leader elections (:mod:`replica_election`: ElectLeaders, auto rebalance): LeaderAndIsr to the
  replicas, the partitions to all live brokers;
* reassignments (:mod:`reassignment`): each phase (TRS + ORS, catch-up, TRS) as LeaderAndIsr to
  the replicas and the partitions to all live brokers, StopReplica(delete) to removed replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from kmeta.controller.acls import AclManager
from kmeta.controller.admin import TopicPlan, plan_create_partitions, plan_create_topics
from kmeta.controller.barrier import Barrier as Barrier  # (re-exported for the handlers)
from kmeta.controller.barrier import DeletionBarrier
from kmeta.controller.channel_manager import ControllerChannelManager
from kmeta.controller.config import ControllerConfig
from kmeta.controller.deletion import TopicDeletionManager
from kmeta.controller.election import add_replica, remove_replicas
from kmeta.controller.event_manager import ControllerEventManager
from kmeta.controller.faults import Fault, FaultInjector, configured_faults
from kmeta.controller.metrics import ControllerMetrics
from kmeta.controller.model import (
    BrokerInfo,
    ClusterState,
    Endpoint,
    PartitionState,
    TopicInfo,
    TopicPartition,
)
from kmeta.controller.reassignment import ReassignmentManager
from kmeta.controller.replica_election import ReplicaElectionManager
from kmeta.controller.request_batch import (
    UM_FULL,
    BatchContext,
    ControllerBrokerRequestBatch,
)
from kmeta.controller.state_log import StateChangeLog
from kmeta.controller.store import STORE_RETRY_S, ControllerStore
from kmeta.controller.topic_configs import TopicConfigManager
from kmeta.metadata.log_config import ConfigError, validate
from kmeta.net.security.authorizer import Authorizer
from kmeta.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class _Event:
    __slots__ = ("fn", "future", "name", "result")

    def __init__(
        self, name: str, fn: Callable[[], Any], future: asyncio.Future[Any] | None
    ) -> None:
        self.name = name
        self.fn = fn
        self.future = future
        self.result: Any = None

    def process(self) -> None:
        self.result = self.fn()

    def complete(self) -> None:
        """The event's writes are durable: answer (never before, see the event manager)."""
        if self.future is not None and not self.future.done():
            self.future.set_result(self.result)

    def fail(self, exc: BaseException) -> None:
        if self.future is not None and not self.future.done():
            self.future.set_exception(exc)


class KafkaController:
    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        self.metrics = ControllerMetrics()
        self.store = ControllerStore(config.data_dir)
        self.state: ClusterState = ClusterState()
        log_path = f"{config.data_dir}/state-change.log" if config.state_change_log else None
        self.state_log = StateChangeLog(log_path, config.node_id)
        #: fault injection (delay / drop / pause the requests to chosen brokers)
        self.faults = FaultInjector()
        for broker_id, fault in configured_faults(config.faults, config.fault_file).items():
            self.faults.set(broker_id, fault)
        self.faults.on_change = self._fault_changed
        self.channel = ControllerChannelManager(
            listener_name=config.broker_control_listener,
            metrics=self.metrics,
            state_log=self.state_log,
            client_id=f"kmeta-controller-{config.node_id}",
            retry_backoff_s=config.retry_backoff_ms / 1000.0,
            request_timeout_s=config.request_timeout_ms / 1000.0,
            tls=config.tls,
            faults=self.faults,
        )
        self.events = ControllerEventManager(
            self.metrics,
            self._event_done,
            self.store,
            outbox=self.channel,
            on_rollback=self._rolled_back,
        )
        #: weak: the barrier of a refused event goes with its request's answer
        self.barriers: weakref.WeakSet[Barrier] = weakref.WeakSet()
        self.deletion = TopicDeletionManager(self)
        self.elections = ReplicaElectionManager(self)
        self.reassignments = ReassignmentManager(self)
        self.configs = TopicConfigManager(self)
        self.acls = AclManager(self)
        self._deadlines: dict[int, float] = {}  # broker id -> session expiry (monotonic)
        #: broker id -> peer address of the connection its session was registered on: only
        #: that connection may heartbeat or shut it down (epochs are no secret: /status shows
        #: them). None until the broker registers after a controller start. Only consulted
        #: for a broker alive with the asked epoch, so a fenced one's entry is harmless (and
        #: survives a rolled-back event, which memory must).
        self._session_peers: dict[int, object] = {}
        self._expiring: set[int] = set()
        self._liveness_task: asyncio.Task[None] | None = None
        self._update_id = 0
        self._event_update_id = 0
        self.epoch = 0
        #: refused registrations already logged (a refused broker retries every 100 ms)
        self._said: set[tuple[object, ...]] = set()

    # -- lifecycle --------------------------------------------------------------------------------
    async def start(self) -> None:
        self.epoch = self.store.bump_controller_epoch()
        self.state = self.store.load()
        self.state.controller_epoch = self.epoch
        self.state_log.controller_epoch = self.epoch
        log.info("controller %d starting with epoch %d", self.config.node_id, self.epoch)
        self.channel.startup()
        self.events.start()
        self._startup()
        self._liveness_task = asyncio.get_running_loop().create_task(self._liveness_loop())
        self.elections.start()
        self.reassignments.start()

    async def stop(self) -> None:
        if self._liveness_task is not None:
            self._liveness_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._liveness_task
        await self.elections.stop()
        await self.reassignments.stop()
        await self.events.close()
        await self.channel.shutdown()
        self.state_log.close()
        self.store.close()

    def _startup(self) -> None:
        """The Startup event, again after STORE_RETRY_S if it is refused."""

        def done(future: asyncio.Future[Any]) -> None:
            if not future.cancelled() and future.exception() is not None:
                log.error("controller startup failed (%s); retrying", future.exception())
                asyncio.get_running_loop().call_later(STORE_RETRY_S, self._startup)

        self.enqueue("Startup", self._on_startup).add_done_callback(done)

    def _rolled_back(self) -> None:
        """A refused or failed event: memory becomes the store's state again (the events'
        requests were dropped unsent, so brokers still hold what the store holds)."""
        self.state = self.store.load()
        self.state.controller_epoch = self.epoch
        live = set(self.state.live_broker_ids())
        for broker_id in list(self._deadlines):
            if broker_id not in live:  # a registration that was not kept
                del self._deadlines[broker_id]
        now = time.monotonic()
        for broker_id in live:  # a fencing that was not kept is retried (unless it heartbeats)
            if self._deadlines.get(broker_id, 0.0) < now:
                self._deadlines[broker_id] = now + STORE_RETRY_S
        self.deletion.reloaded()
        self.reassignments.reloaded()

    @property
    def authorizer(self) -> Authorizer | None:
        """Read by kmeta.net.security.authorizer.allowed for requests to the controller."""
        return self.acls.authorizer()

    def enqueue(self, name: str, fn: Callable[[], Any]) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.events.put(_Event(name, fn, future))
        return future

    @staticmethod
    def event(name: str, fn: Callable[[], Any], future: asyncio.Future[Any] | None) -> _Event:
        """An event whose ``future`` gets fn's result once the event's writes are durable."""
        return _Event(name, fn, future)

    def _event_done(self, event: Any, queue_s: float, process_s: float) -> None:
        self.state_log.write(
            "event",
            name=event.name,
            queue_ms=queue_s * 1000.0,
            process_ms=process_s * 1000.0,
            update_id=self._event_update_id,
        )
        self._event_update_id = 0
        self.state_log.flush()

    # -- helpers ----------------------------------------------------------------------------------
    def _batch(self) -> ControllerBrokerRequestBatch:
        return ControllerBrokerRequestBatch(
            BatchContext(
                self.state,
                self.channel,
                self.epoch,
                self.config.node_id,
                self.reassignments.current,
            )
        )

    def _update_id_for_event(self) -> int:
        if not self._event_update_id:
            self._update_id += 1
            self._event_update_id = self._update_id
        return self._event_update_id

    def _send(
        self,
        *,
        um_to: Iterable[int] = (),
        um_partitions: Iterable[TopicPartition] = (),
        lair: Iterable[tuple[Iterable[int], TopicPartition, bool]] = (),
        stop: Iterable[tuple[Iterable[int], TopicPartition, bool]] = (),
        um_type: int = 1,
        barrier: Barrier | None = None,
        stop_callback: Callable[[Any, int], None] | None = None,
        acls: bool = False,
    ) -> list[int]:
        batch = self._batch()
        batch.new_batch()
        if acls:
            batch.add_acls()
        for brokers, tp, is_new in lair:
            batch.add_leader_and_isr(brokers, tp, is_new)
        batch.add_update_metadata(um_to, um_partitions)
        for brokers, tp, delete in stop:
            batch.add_stop_replica(brokers, tp, delete)
        if batch.is_empty():
            return []
        return batch.send_requests_to_brokers(
            self._update_id_for_event(), barrier.ack if barrier else None, um_type, stop_callback
        )

    def _persist_partitions(
        self, changed: dict[TopicPartition, PartitionState], write: bool = True
    ) -> None:
        """Set ``changed`` in memory and (``write``) in the store's open transaction."""
        by_topic: dict[str, list[tuple[int, PartitionState]]] = {}
        for (topic, p), st in changed.items():
            self.state.topics[topic].partitions[p] = st
            by_topic.setdefault(topic, []).append((p, st))
        if not write:
            return
        for topic, parts in by_topic.items():
            self.store.put_partitions(topic, parts)

    def _propagation(self, targets: list[int], forwarder: int | None) -> set[int]:
        """The brokers an admin answer waits for: all (barrier on) or the forwarding one.

        Never a broker whose requests a fault drops: its acknowledgement will not come."""
        targets = [b for b in targets if not self.faults.drops(b)]
        if self.config.propagation_barrier:
            return set(targets)
        return {forwarder} & set(targets) if forwarder is not None else set()

    def say_once(self, *key: object) -> bool:
        """True the first time ``key`` is seen (bounded: forgets all after 10,000 keys)."""
        if key in self._said:
            return False
        if len(self._said) >= 10_000:
            self._said.clear()
        self._said.add(key)
        return True

    # -- liveness ---------------------------------------------------------------------------------
    def has_valid_session(self, broker_id: int) -> bool:
        """KRaft's BrokerHeartbeatManager.hasValidSession: alive and heard from in time."""
        deadline = self._deadlines.get(broker_id)
        if deadline is None or not self.state.is_alive(broker_id):
            return False
        return deadline >= time.monotonic()

    def _owns_session(self, broker_id: int, broker_epoch: int, peer: object) -> bool:
        """The broker is registered alive with exactly this epoch (KRaft's checkBrokerEpoch),
        and ``peer`` is the connection that registered it. Not a principal (control
        connections are not authenticated yet), but a forger must hold the broker's own
        connection rather than read its epoch: a killed broker's connection is gone, so
        nothing keeps it alive. A broker whose connection was lost registers again on the
        new one (same incarnation: same epoch, nothing changes)."""
        broker = self.state.brokers.get(broker_id)
        if broker is None or not broker.alive or broker.epoch != broker_epoch:
            return False
        return self._session_peers.get(broker_id) == peer

    def heartbeat(self, broker_id: int, broker_epoch: int, peer: object) -> bool:
        """Record a heartbeat; False (nothing changes) unless it comes from the session's
        owner (:meth:`_owns_session`)."""
        if not self._owns_session(broker_id, broker_epoch, peer):
            return False
        self._deadlines[broker_id] = time.monotonic() + self.config.session_timeout_s
        return True

    async def _liveness_loop(self) -> None:
        period = min(0.1, self.config.session_timeout_s / 10)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for broker_id, deadline in list(self._deadlines.items()):
                if deadline < now and broker_id not in self._expiring:
                    self._expiring.add(broker_id)
                    epoch = self.state.brokers[broker_id].epoch
                    expire = functools.partial(self._on_expired, broker_id, epoch)
                    self.events.put(_Event("BrokerExpiration", expire, None))

    def _on_expired(self, broker_id: int, epoch: int) -> None:
        self._expiring.discard(broker_id)
        broker = self.state.brokers.get(broker_id)
        deadline = self._deadlines.get(broker_id)
        if broker is None or not broker.alive or broker.epoch != epoch:
            return
        if deadline is not None and deadline >= time.monotonic():
            return  # a heartbeat arrived while the event waited
        log.warning("broker %d missed its session timeout; fencing it", broker_id)
        self._on_broker_failure([broker_id])

    # -- fault injection --------------------------------------------------------------------------
    def _fault_changed(self, broker_id: int, old: Fault | None, new: Fault | None) -> None:
        """A drop releases the barriers waiting on the broker; the end of one resyncs it."""
        if new is not None and new.drop:
            for barrier in list(self.barriers):
                barrier.broker_gone(broker_id)
        elif old is not None and old.drop:
            resync = functools.partial(self._resync, broker_id)
            self.events.put(_Event("FaultCleared", resync, None))

    def _resync(self, broker_id: int) -> None:
        """Send a broker everything (as after its registration): what it missed was dropped."""
        if not self.state.is_alive(broker_id) or not self.channel.has_broker(broker_id):
            return
        hosted = self._live_partitions_on(broker_id)
        self._send(
            um_to=[broker_id],
            um_partitions=self.state.all_partitions(),
            lair=[([broker_id], tp, False) for tp in hosted],
            stop=self.deletion.stops_for(broker_id=broker_id),
            um_type=UM_FULL,
            stop_callback=self.deletion.stop_replica_answered,
        )

    def _live_partitions_on(self, broker_id: int) -> list[TopicPartition]:
        """The partitions with a replica on ``broker_id``, but those of topics being deleted."""
        deleting = self.state.deleting
        hosted = self.state.partitions_on(broker_id)
        return [tp for tp in hosted if tp[0] not in deleting] if deleting else hosted

    # -- events -----------------------------------------------------------------------------------
    def _on_startup(self) -> None:
        """Failover (Kafka's onControllerFailover): resume from the store and push everything.

        Brokers registered before the restart stay registered (the store holds them, as
        ZooKeeper held Kafka's broker registrations) with their epochs and a fresh session;
        one that died meanwhile expires after the session timeout. Every live broker gets
        LeaderAndIsr for the partitions it hosts (the replica state machine's startup) and the
        full partition set with the live brokers (sendUpdateMetadataRequest), all stamped
        with the new controller epoch, which fences any request of the previous controller.
        """
        now = time.monotonic()
        for broker in self.state.brokers.values():
            if broker.alive:
                self.channel.add_broker(broker.broker_id, broker.listeners)
                self._deadlines[broker.broker_id] = now + self.config.session_timeout_s
        live = self.state.live_broker_ids()
        partitions = self.state.all_partitions()
        deleting = self.state.deleting
        self._send(
            um_to=live,
            um_partitions=partitions,
            lair=[
                (self.state.partition(tp).replicas, tp, False)
                for tp in partitions
                if tp[0] not in deleting
            ],
            um_type=UM_FULL,
        )
        self.deletion.resume()  # Kafka resumes the topics still under /admin/delete_topics

    def register_broker(
        self,
        broker_id: int,
        incarnation_id: str,
        listeners: tuple[Endpoint, ...],
        rack: str | None,
        peer: object = None,
    ) -> tuple[ErrorCode, int]:
        """BrokerRegistration event: (error, broker epoch).

        As KRaft's ClusterControlManager.registerBroker: the same incarnation registering
        again keeps its epoch; another incarnation of an id whose session is still valid is
        refused with DUPLICATE_BROKER_REGISTRATION and nothing changes (a restarted broker
        retries until the old session expired; a second process with a live id never takes
        over its address and leaderships). Past the session, the old incarnation is failed
        and the new one registered, in one event. ``peer``: the connection that owns the
        session from now on."""
        old = self.state.brokers.get(broker_id)
        if old is not None and old.alive and old.incarnation_id == incarnation_id:
            # the same process again (a retry, or its session on a new connection)
            self._deadlines[broker_id] = time.monotonic() + self.config.session_timeout_s
            self._session_peers[broker_id] = peer
            return ErrorCode.NONE, old.epoch
        if old is not None and self.has_valid_session(broker_id):
            if self.say_once("duplicate", broker_id, incarnation_id, old.epoch):
                log.info(
                    "refusing the registration of broker %d incarnation %s: incarnation %s is "
                    "registered with epoch %d and its session is valid",
                    broker_id, incarnation_id, old.incarnation_id, old.epoch,
                )  # fmt: skip
            return ErrorCode.DUPLICATE_BROKER_REGISTRATION, -1
        failed: dict[TopicPartition, PartitionState] = {}
        before: dict[TopicPartition, PartitionState] = {}
        if old is not None and old.alive:
            # Bounced: fail the old incarnation first. What that changes goes out below with
            # the re-registration (one push of the final states, not two of 100k partitions).
            failed = self._on_broker_failure([broker_id], send=False, before=before)
        with self.store.transaction():
            epoch = self.store.next_broker_epoch()
            broker = BrokerInfo(broker_id, epoch, incarnation_id, listeners, rack, True)
            self.state.brokers[broker_id] = broker
            self.store.put_broker(broker)
            hosted = self._live_partitions_on(broker_id)
            changed: dict[TopicPartition, PartitionState] = {}
            alive = set(self.state.live_broker_ids()).__contains__  # C-level, 100k calls
            for tp in hosted:
                st = self.state.partition(tp)
                new = add_replica(st, broker_id, alive)
                if new is not st:
                    changed[tp] = new
            changed = {**failed, **changed}  # the final states (written once)
            if before:
                self._drop_round_trips(changed, before)
            self._persist_partitions(changed)
        self._deadlines[broker_id] = time.monotonic() + self.config.session_timeout_s
        self._session_peers[broker_id] = peer
        self.channel.add_broker(broker_id, listeners)
        others = [b for b in self.state.live_broker_ids() if b != broker_id]
        # Kafka's onBrokerStartup order: the others learn of the broker, the new broker gets
        # the full partition set (it serves clients from then on), then LeaderAndIsr for its
        # replicas. The last two are a follow-up event: with 100k partitions, building and
        # encoding them takes seconds, and the full set goes out meanwhile (while this
        # event's commit runs), instead of after them.
        self._send(um_to=others)
        self._send(um_to=[broker_id], um_partitions=self.state.all_partitions(), um_type=UM_FULL)
        hosted_only = [tp for tp in hosted if tp not in changed]
        follow_up = functools.partial(
            self._registration_follow_up, broker_id, epoch, hosted_only, list(changed)
        )
        self.events.put(_Event("BrokerRegistrationLeaderAndIsr", follow_up, None))
        self.reassignments.broker_registered(broker_id)
        log.info("broker %d registered with epoch %d", broker_id, epoch)
        return ErrorCode.NONE, epoch

    def _registration_follow_up(
        self,
        broker_id: int,
        epoch: int,
        hosted: list[TopicPartition],
        changed: list[TopicPartition],
    ) -> None:
        """LeaderAndIsr for a newly registered broker's replicas, and the partitions its
        return changed (ISR, leader) to every replica and the other brokers. Reads the state
        now: an event in between may have changed or deleted some of them."""
        broker = self.state.brokers.get(broker_id)
        if broker is None or not broker.alive or broker.epoch != epoch:
            return  # the registration was refused (its commit failed), or is stale
        topics = self.state.topics

        def exists(tp: TopicPartition) -> bool:
            info = topics.get(tp[0])
            return (
                info is not None and tp[1] in info.partitions and tp[0] not in self.state.deleting
            )

        changed = [tp for tp in changed if exists(tp)]
        lair: list[tuple[Iterable[int], TopicPartition, bool]] = [
            ([broker_id], tp, False) for tp in hosted if exists(tp)
        ]
        lair += [(self.state.partition(tp).replicas, tp, False) for tp in changed]
        others = [b for b in self.state.live_broker_ids() if b != broker_id]
        self._send(um_to=others, um_partitions=changed, lair=lair)
        # then the deletions that waited for it (Kafka: resumeDeletionForTopics)
        self._send(
            stop=self.deletion.stops_for(broker_id=broker_id),
            stop_callback=self.deletion.stop_replica_answered,
        )

    def _drop_round_trips(
        self,
        changed: dict[TopicPartition, PartitionState],
        before: dict[TopicPartition, PartitionState],
    ) -> None:
        """A bounced broker's partitions that end with the leader and ISR they had (it was a
        follower, left the ISR and rejoined it) keep their old state: nothing to write or send
        to anyone but the broker itself (its LeaderAndIsr), and at 100k partitions that is
        most of a resync's work."""
        partitions = {name: info.partitions for name, info in self.state.topics.items()}
        for tp, old in before.items():
            new = changed.get(tp)
            if new is not None and new[1] == old[1] and new[2] == old[2]:  # isr, leader
                partitions[tp[0]][tp[1]] = old
                del changed[tp]

    def _on_broker_failure(
        self,
        dead: list[int],
        barrier: Barrier | None = None,
        send: bool = True,
        before: dict[TopicPartition, PartitionState] | None = None,
    ) -> dict[TopicPartition, PartitionState]:
        """Fence ``dead``, re-elect and shrink ISRs; returns the changed partitions.

        ``send=False``: the caller sends them in its own batch (a bounced broker's
        re-registration); ``before`` then gets the changed partitions' previous states."""
        gone = set(dead)
        with self.store.transaction():
            for broker_id in dead:
                broker = self.state.brokers[broker_id]
                broker.alive = False
                self.store.put_broker(broker)
            changed: dict[TopicPartition, PartitionState] = {}
            deleting = self.state.deleting
            for topic in self.state.topics.values():
                if topic.name in deleting:
                    continue  # no election for a topic being deleted (Kafka: ineligible)
                for p, st in topic.partitions.items():
                    if not gone.isdisjoint(st.replicas):
                        new = remove_replicas(st, gone.__contains__)
                        changed[(topic.name, p)] = new
                        if before is not None:
                            before[(topic.name, p)] = st
            self._persist_partitions(changed, write=send)  # else written by the caller
        for broker_id in dead:
            self._deadlines.pop(broker_id, None)
            self.channel.remove_broker(broker_id)
            # (not ``barrier``: the caller's own is armed below, and must not resolve early)
            for waiting in list(self.barriers):
                if waiting is not barrier:
                    waiting.broker_gone(broker_id)
        if not send:
            return changed
        lair = [(self.state.partition(tp).replicas, tp, False) for tp, st in changed.items()]
        targets = self._send(
            um_to=self.state.live_broker_ids(), um_partitions=changed, lair=lair, barrier=barrier
        )
        if barrier is not None:
            barrier.arm(b for b in targets if not self.faults.drops(b))
        return changed

    def controlled_shutdown(
        self, broker_id: int, broker_epoch: int, peer: object
    ) -> tuple[int, list[TopicPartition], Barrier | None]:
        """ControlledShutdown event: (error code, partitions it still leads, barrier).

        Only from the session's owner (:meth:`_owns_session`): an epoch other than the
        registered one (-1, "unknown", too) would let anyone move a broker's leaders."""
        broker = self.state.brokers.get(broker_id)
        if broker is None or not broker.alive:
            return ErrorCode.BROKER_NOT_AVAILABLE, [], None
        if not self._owns_session(broker_id, broker_epoch, peer):
            return ErrorCode.STALE_BROKER_EPOCH, [], None
        # Kafka answers the replicated partitions (RF > 1) it could not move; a single
        # replica partition has nowhere to go and is not listed.
        remaining = [
            (t.name, p)
            for t in self.state.topics.values()
            for p, st in t.partitions.items()
            if st.leader == broker_id
            and len(st.replicas) > 1
            and not any(r != broker_id and self.state.is_alive(r) for r in st.isr)
        ]
        barrier = Barrier(self.barriers)
        # Kafka moves leaderships and shrinks ISRs here; the broker's exit then fences it.
        # We do both at once: the broker is about to stop anyway.
        self._on_broker_failure([broker_id], barrier)
        return 0, remaining, barrier

    # -- admin ------------------------------------------------------------------------------------
    def create_topics(
        self, topics: Any, validate_only: bool, forwarder: int | None
    ) -> tuple[list[TopicPlan], dict[str, uuid.UUID], Barrier | None]:
        plans = plan_create_topics(
            topics,
            self.state,
            default_partitions=self.config.default_partitions,
            default_replication_factor=self.config.default_replication_factor,
            max_partitions=self.config.max_partitions_per_topic,
        )
        configs = self._creation_configs(topics, plans)
        ok = [p for p in plans if p.error == 0]
        if validate_only or not ok:
            return plans, {}, None
        ids: dict[str, uuid.UUID] = {}
        new_tps: list[TopicPartition] = []
        with self.store.transaction():
            for plan in ok:
                info = TopicInfo(plan.name, uuid.uuid4())
                for p, replicas in sorted(plan.assignment.items()):
                    live = tuple(r for r in replicas if self.state.is_alive(r))
                    leader = live[0] if live else -1
                    info.partitions[p] = PartitionState(
                        tuple(replicas), live or tuple(replicas[:1]), leader
                    )
                    new_tps.append((plan.name, p))
                self.state.topics[plan.name] = info
                ids[plan.name] = info.topic_id
                self.store.put_topic(info)
                self.store.put_partitions(plan.name, info.partitions.items())
                info.configs = configs.get(plan.name, {})
                if info.configs:
                    self.store.put_topic_configs(plan.name, info.configs)
        barrier = self._announce(new_tps, forwarder)
        return plans, ids, barrier

    @staticmethod
    def _creation_configs(topics: Any, plans: list[TopicPlan]) -> dict[str, dict[str, str]]:
        """The valid plans' configs as kept; a plan with a config Kafka's LogConfig rejects
        fails with INVALID_CONFIG (Kafka's message), as ZkAdminManager.createTopics."""
        given = {t.name: t.configs for t in topics}
        out: dict[str, dict[str, str]] = {}
        for plan in plans:
            entries = given.get(plan.name) or ()
            if plan.error != 0 or not entries:
                continue
            nulls = [c.name for c in entries if c.value is None]
            if nulls:
                message = f"Null value not supported for topic configs: {','.join(nulls)}"
                plan.fail(ErrorCode.INVALID_CONFIG, message)
                continue
            try:
                out[plan.name] = validate({c.name: c.value for c in entries})
            except ConfigError as exc:
                plan.fail(ErrorCode.INVALID_CONFIG, str(exc))
        return out

    def _announce(self, tps: list[TopicPartition], forwarder: int | None) -> Barrier:
        barrier = Barrier(self.barriers)
        lair = [(self.state.partition(tp).replicas, tp, True) for tp in tps]
        targets = self._send(
            um_to=self.state.live_broker_ids(), um_partitions=tps, lair=lair, barrier=barrier
        )
        return barrier.arm(self._propagation(targets, forwarder))

    def create_partitions(
        self, topics: Any, validate_only: bool, forwarder: int | None
    ) -> tuple[list[TopicPlan], Barrier | None]:
        plans = plan_create_partitions(
            topics, self.state, max_partitions=self.config.max_partitions_per_topic
        )
        ok = [p for p in plans if p.error == 0]
        if validate_only or not ok:
            return plans, None
        new_tps: list[TopicPartition] = []
        with self.store.transaction():
            for plan in ok:
                info = self.state.topics[plan.name]
                added = []
                for p, replicas in sorted(plan.assignment.items()):
                    live = tuple(r for r in replicas if self.state.is_alive(r))
                    st = PartitionState(
                        tuple(replicas), live or tuple(replicas[:1]), live[0] if live else -1
                    )
                    info.partitions[p] = st
                    added.append((p, st))
                    new_tps.append((plan.name, p))
                self.store.put_partitions(plan.name, added)
        return plans, self._announce(new_tps, forwarder)

    def delete_topics(self, names: list[str], forwarder: int | None) -> Barrier:
        """DeleteTopics event (see :mod:`kmeta.controller.deletion`).

        Barrier on: the answer waits until the live brokers acked the leader -2 update and
        every live replica its StopReplica, and the removal is committed, so the name can be
        created again right away. Off: the forwarding broker's UpdateMetadata ack."""
        names = [n for n in names if n not in self.state.deleting]
        barrier: Barrier = (
            DeletionBarrier(self.barriers, ())
            if self.config.propagation_barrier
            else Barrier(self.barriers)
        )
        targets = self.deletion.start(names, barrier) if names else []
        return barrier.arm(self._propagation(targets, forwarder))
