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
* topic deletion (:mod:`kmeta.controller.topics.deletion`): leader -2 to all live brokers, StopReplica(delete) to the
  replicas, removal once every replica acknowledged (a dead one's waits for its return);
* leader elections (:mod:`kmeta.controller.topics.replica_election`: ElectLeaders, auto rebalance): LeaderAndIsr to the
  replicas, the partitions to all live brokers;
* reassignments (:mod:`kmeta.controller.topics.reassignment`): each phase (TRS + ORS, then TRS
  once the leaders' AlterPartition put it all in the ISR) as LeaderAndIsr to the replicas and
  the partitions to all live brokers, StopReplica(delete) to removed replicas;
* ISR changes (:mod:`kmeta.controller.topics.isr`: a leader's AlterPartition): LeaderAndIsr to
  the replicas, the partitions to all live brokers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from kmeta.controller.brokers.fault_reactions import FaultReactions
from kmeta.controller.brokers.lifecycle import BrokerLifecycleManager
from kmeta.controller.brokers.stale_store import StaleStoreGuard
from kmeta.controller.brokers.startup_resync import StartupResync
from kmeta.controller.channel.barrier import Barrier, BarrierRegistry
from kmeta.controller.channel.channel_manager import Callback, ControllerChannelManager
from kmeta.controller.channel.faults import FaultInjector, configured_faults
from kmeta.controller.channel.request_batch import (
    UPDATE_METADATA_VERSION,
    BatchSender,
    ControllerRequests,
)
from kmeta.controller.channel.update_metadata_batch import UpdateMetadataBlocks
from kmeta.controller.config import ControllerConfig
from kmeta.controller.event_manager import ControllerEventManager
from kmeta.controller.metrics import ControllerMetrics
from kmeta.controller.model import ControllerContext, PartitionRegistration, TopicInfo
from kmeta.controller.producer_ids import ProducerIdControlManager
from kmeta.controller.security.acls import AclManager
from kmeta.controller.security.scram_users import ScramUserManager
from kmeta.controller.startup import ControllerStartup
from kmeta.controller.store.cluster_store import ClusterStore
from kmeta.controller.store.errors import StorageError
from kmeta.controller.store.sqlite_store import ControllerStore
from kmeta.controller.topics.admin_manager import AdminManager
from kmeta.controller.topics.configs import TopicConfigManager
from kmeta.controller.topics.deletion import TopicDeletionManager
from kmeta.controller.topics.isr import IsrManager
from kmeta.controller.topics.reassignment import ReassignmentManager
from kmeta.controller.topics.replica_election import ReplicaElectionManager
from kmeta.metadata.model import TopicPartitionKey
from kmeta.net.security.authorizer import Authorizer
from kmeta.net.security.scram import ScramCredentials
from kmeta.net.state_change_log import StateChangeLog

log = logging.getLogger(__name__)

T = TypeVar("T")


class KafkaController:
    def __init__(self, config: ControllerConfig, store: ClusterStore | None = None) -> None:
        self.config = config
        self.metrics = ControllerMetrics()
        #: the embedded SQLite store unless one is given (a quorum's ZooKeeperStore)
        self.store: ClusterStore = store if store is not None else ControllerStore(config.data_dir)
        self.state: ControllerContext = ControllerContext()
        log_path = f"{config.data_dir}/state-change.log" if config.state_change_log else None
        self.state_log = StateChangeLog(log_path, config.node_id, component="controller")
        #: fault injection (delay / drop / pause the requests to chosen brokers)
        self.faults = FaultInjector()
        for broker_id, fault in configured_faults(config.faults, config.fault_file).items():
            self.faults.set(broker_id, fault)
        self.channel = ControllerChannelManager(
            listener_name=config.broker_control_listener,
            metrics=self.metrics,
            state_log=self.state_log,
            client_id=f"kmeta-controller-{config.node_id}",
            retry_backoff_s=config.retry_backoff_ms / 1000.0,
            request_timeout_s=config.request_timeout_ms / 1000.0,
            tls=config.tls,
            faults=self.faults,
            sasl=config.cluster_credential,
        )
        self.events = ControllerEventManager(
            self.metrics,
            self._event_done,
            self.store,
            outbox=self.channel,
            on_rollback=self._rolled_back,
        )
        #: weak: the barrier of a refused event goes with its request's answer
        self.barriers = BarrierRegistry()
        self.deletion = TopicDeletionManager(self)
        self.admin = AdminManager(self, self.deletion)
        self.elections = ReplicaElectionManager(self)
        self.reassignments = ReassignmentManager(self)
        self.isr = IsrManager(self, self.reassignments, self.state_log)
        self.configs = TopicConfigManager(self)
        self.acls = AclManager(self)
        self.producer_ids = ProducerIdControlManager(self)
        self.brokers = BrokerLifecycleManager(
            self, self.channel, self.faults, self.deletion, self.reassignments
        )
        self.faults.on_change = FaultReactions(self, self.channel, self.deletion).changed
        #: SCRAM credentials (kmeta.controller.security.scram_users): our SASL listeners verify against
        #: them and every UpdateMetadata carries them to the brokers
        self.credentials = ScramCredentials(
            fixed=tuple(
                (c.username, c.server_credential())
                for c in (*filter(None, (config.cluster_credential,)), *config.sasl_users)
            )
        )
        self.scram_users = ScramUserManager(self, self.credentials)
        #: Startup's LeaderAndIsr, per broker once it registered here (digest-filtered)
        self.resync = StartupResync(self)
        #: a stored live broker's sender starts once it said this store is not older than what
        #: it holds (the embedded store; a quorum's is ZooKeeper); ``refused`` is set if not
        self.refused = asyncio.Event()
        self.store_guard = StaleStoreGuard(
            self,
            f"{config.data_dir}/controller.db",
            self.channel,
            lambda _: self.refused.set(),
            enabled=store is None,
            accept_older=config.accept_older_store,
        )
        #: each topic's encoded UpdateMetadata entry, shared by brokers and requests
        self.topic_blocks = UpdateMetadataBlocks(UPDATE_METADATA_VERSION)
        self.sender = BatchSender(
            self,
            self.channel,
            config.node_id,
            self.reassignments.current,
            self.credentials,
            self.topic_blocks,
        )
        self.epoch = 0
        #: set once the Startup event is durable (Kafka's isActive): the admin APIs wait for
        #: it (kmeta.controller.apis.common), since a change applied before Startup would be
        #: sent to brokers whose channels Startup adds, i.e. to none
        self._active = asyncio.Event()
        self.startup = ControllerStartup(
            self, self.brokers, self.deletion, self.resync, self.reassignments, self._active.set
        )
        #: refused registrations already logged (a refused broker retries every 100 ms)
        self._said: set[tuple[object, ...]] = set()

    # -- lifecycle --------------------------------------------------------------------------------
    async def start(self) -> None:
        self.epoch = self.store.bump_controller_epoch()
        self.state = self.store.load()
        self.resync.loaded()
        self.credentials.replace(self.store.load_scram_credentials())
        self.state.controller_epoch = self.epoch
        self.state_log.controller_epoch = self.epoch
        log.info("controller %d starting with epoch %d", self.config.node_id, self.epoch)
        self.events.start()
        self.startup.begin()
        self.store_guard.started(self.epoch)  # (starts the channel: senders as verified)
        self.brokers.start()
        self.elections.start()
        self.reassignments.start()

    async def stop(self) -> None:
        self.events.stopped = True
        self._active.clear()
        self.resync.stop()
        self.store_guard.stop()
        await self.brokers.stop()
        await self.elections.stop()
        await self.reassignments.stop()
        await self.events.close()
        await self.channel.shutdown()
        self.state_log.close()
        seen = self.store_guard.epoch_seen  # (a stale store's epoch: the brokers' from now on)
        if seen and isinstance(self.store, ControllerStore):
            try:
                with self.store.transaction():
                    if self.store.get_meta("controller_epoch") < seen:
                        self.store.set_meta("controller_epoch", seen)
            except StorageError as exc:
                log.error("could not raise the store's controller epoch to %d: %s", seen, exc)
        self.store.close()

    @property
    def active(self) -> bool:
        """The Startup event is done: an event queued now comes after it."""
        return self._active.is_set()

    def act_while(self, check: Callable[[], bool]) -> None:
        """Send requests and answer admin requests only while ``check()`` holds (a quorum's
        controller: its lease, :mod:`kmeta.controller.quorum.election`)."""
        self.events.may_answer = check
        self.barriers.may_answer = check
        self.channel.may_send = check

    async def wait_active(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for :attr:`active`; whether it is."""
        if not self._active.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self._active.wait()
        return self._active.is_set()

    def _rolled_back(self) -> None:
        """A refused or failed event: memory becomes the store's state again (the events'
        requests were dropped unsent, so brokers still hold what the store holds)."""
        self.state = self.store.load()
        self.credentials.replace(self.store.load_scram_credentials())
        self.state.controller_epoch = self.epoch
        self.brokers.reloaded()
        self.deletion.reloaded()
        self.reassignments.reloaded()

    @property
    def authorizer(self) -> Authorizer | None:
        """Read by kmeta.net.security.authorizer.allowed for requests to the controller."""
        return self.acls.authorizer()

    def enqueue(self, name: str, fn: Callable[[], T]) -> asyncio.Future[T]:
        """The one way to queue a controller event: :meth:`ControllerEventManager.enqueue`
        (answered once durable, while this controller may answer)."""
        return self.events.enqueue(name, fn)

    def may_answer(self) -> bool:
        """May an admin answer leave now? (a quorum's controller: while it holds its lease,
        see :meth:`act_while`)"""
        return self.events.may_answer()

    def _event_done(self, event: Any, queue_s: float, process_s: float) -> None:
        self.state_log.write(
            "event",
            name=event.name,
            queue_ms=queue_s * 1000.0,
            process_ms=process_s * 1000.0,
            update_id=self.sender.event_done(),
        )
        self.state_log.flush()

    # -- helpers ----------------------------------------------------------------------------------
    def send(
        self,
        requests: ControllerRequests,
        *,
        barrier: Barrier | None = None,
        stop_callback: Callback | None = None,
    ) -> list[int]:
        return self.sender.send(requests, barrier=barrier, stop_callback=stop_callback)

    def encode_update_metadata(self, topics: list[TopicInfo]) -> None:
        self.sender.encode_update_metadata(topics)

    def persist_partitions(
        self, changed: dict[TopicPartitionKey, PartitionRegistration], write: bool = True
    ) -> None:
        """Set ``changed`` in memory and (``write``) in the store's open transaction."""
        by_topic: dict[str, list[tuple[int, PartitionRegistration]]] = {}
        for (topic, p), st in changed.items():
            self.state.topics[topic].partitions[p] = st
            by_topic.setdefault(topic, []).append((p, st))
        if not write:
            return
        for topic, parts in by_topic.items():
            self.store.put_partitions(topic, parts)

    def propagation_targets(self, targets: list[int], forwarder: int | None) -> set[int]:
        """The brokers an admin answer waits for: all (barrier on) or the forwarding one.

        Never a broker whose requests a fault drops: its acknowledgement will not come."""
        targets = [b for b in targets if not self.faults.drops(b)]
        if self.config.propagation_barrier:
            return set(targets)
        return {forwarder} & set(targets) if forwarder is not None else set()

    def reachable(self, broker_id: int) -> bool:
        """Alive, with a channel, and no fault dropping its requests: a request sent to it
        can be answered."""
        return (
            self.state.is_alive(broker_id)
            and self.channel.has_broker(broker_id)
            and not self.faults.drops(broker_id)
        )

    def say_once(self, *key: object) -> bool:
        """True the first time ``key`` is seen (bounded: forgets all after 10,000 keys)."""
        if key in self._said:
            return False
        if len(self._said) >= 10_000:
            self._said.clear()
        self._said.add(key)
        return True
