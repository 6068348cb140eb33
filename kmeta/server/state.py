"""BrokerState: what the broker's handlers share (cache, epochs, replica roles, the replica
manager and its logs).

Fencing follows Kafka 3.x ZK mode (``KafkaApis.isBrokerEpochStale`` and ``ReplicaManager``):

* broker epoch: a request that carries a known epoch (not -1) older than this broker's
  current epoch is STALE_BROKER_EPOCH (it was meant for an earlier incarnation of this
  broker). A newer one is accepted: the controller may see the registration first.
* controller epoch: one older than the highest seen is STALE_CONTROLLER_EPOCH; an accepted
  control request raises the highest seen to its epoch. The three control APIs share it.

Both leave the cache and the replica states untouched.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Sequence

from kmeta.metadata.cache import MetadataCache
from kmeta.metadata.model import TopicPartitionKey
from kmeta.net.dispatch import HandlerRegistry, RequestContext
from kmeta.net.metrics import PlainHistogram
from kmeta.net.security.authorizer import Authorizer
from kmeta.net.security.scram import MECHANISM_NAMES, ScramCredential, ScramCredentials
from kmeta.net.state_change_log import StateChangeLog
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages.update_metadata import KmetaScramCredential
from kmeta.server.config import BrokerConfig
from kmeta.server.control_order import ControlOrder
from kmeta.server.coordinator.coordinators import Coordinators
from kmeta.server.fetcher.fetcher_manager import ReplicaFetcherManager
from kmeta.server.producer_id_manager import ProducerIdManager
from kmeta.server.replica.replica_manager import ReplicaManager
from kmeta.server.replica.replica_states import FOLLOWER as FOLLOWER
from kmeta.server.replica.replica_states import LEADER as LEADER
from kmeta.server.replica.replica_states import ReplicaState as ReplicaState
from kmeta.server.replica.replica_states import ReplicaStates
from kmeta.server.to_controller.forwarding import ForwardingManager
from kmeta.server.txn.coordinator import TransactionCoordinator


class BrokerState:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.cache = MetadataCache(config.broker_id, config.cluster_id)
        #: set by the controller link on registration; -1 until then (nothing is stale)
        self.broker_epoch = -1
        self.controller_epoch = 0  # Kafka's KafkaController.InitialControllerEpoch
        self.replicas: ReplicaStates = ReplicaStates()
        #: control requests apply one at a time, in order (a large update takes steps)
        self.control_order = ControlOrder()
        #: the partitions this broker holds and their logs (Produce, Fetch, the log APIs)
        self.replica_manager = ReplicaManager(
            config, self.replicas, self.cache, ReplicaFetcherManager
        )
        self.replica_manager.broker_epoch_of = lambda: self.broker_epoch
        #: ISR changes go to the controller over the link's forwarding connection
        self.replica_manager.isr.channel = lambda: self.forwarding
        #: the group and transaction coordinator runtimes (kmeta.server.coordinator): shards
        #: of the internal topics' partitions this broker leads
        self.coordinators = Coordinators(
            config, self.replica_manager, self.cache,
            lambda: None if self.forwarding is None else self.forwarding.forward,
        )  # fmt: skip
        self.coordinators.install()
        #: producer ids (InitProducerId, the transaction coordinator), from blocks the
        #: controller hands out over the link's forwarding connection
        self.producer_ids = ProducerIdManager(config.broker_id, lambda: self.broker_epoch)
        self.producer_ids.channel = lambda: self.forwarding
        #: the transaction coordinator (kmeta.server.txn): a shard per __transaction_state
        #: partition led here, on the runtime; producer ids from the manager above
        self.txn_coordinator = TransactionCoordinator.install(config, self.cache, self.coordinators, self.producer_ids)
        #: error name -> partitions of Produce requests answered with it (NONE: acknowledged)
        self.produce_results: collections.Counter[str] = collections.Counter()
        #: the ACL authorizer (--authorizer acl), holding the ACLs the controller pushed;
        #: None: every request is allowed and the ACL APIs answer SECURITY_DISABLED
        self.authorizer: Authorizer | None = (
            Authorizer(config.authorizer) if config.authorizer.enabled else None
        )
        #: the controller link's ForwardingManager when the broker runs with --controller (set
        #: as the link starts, kmeta.server.lifecycle): admin requests, ISR changes and
        #: producer id blocks go to the controller through it (Kafka's forwardingManager)
        self.forwarding: ForwardingManager | None = None
        #: topics a Metadata request is auto-creating -> the task sending their CreateTopics
        #: (kmeta.server.auto_topic_creation: a creation in flight is not sent twice)
        self.auto_creating: dict[str, asyncio.Task[None]] = {}
        #: seconds per applied UpdateMetadata (exposed by kmeta.server.metrics)
        self.update_apply = PlainHistogram()
        #: the first full UpdateMetadata (v8 Type FULL) of this process was applied: the cache
        #: holds the controller's whole state, and the broker may answer clients from it
        self.holds_full_metadata = False
        #: called once, when that happens (the broker opens its client listeners)
        self.on_full_metadata: Callable[[], None] | None = None
        #: SCRAM credentials our SASL listeners verify against: the controller's whole set,
        #: as its last UpdateMetadata carried it (kmeta's tagged field kmeta_scram_credentials)
        own = config.cluster_credential
        self.credentials = ScramCredentials(
            fixed=() if own is None else ((own.username, own.server_credential()),)
        )
        self.state_log: StateChangeLog | None = (
            StateChangeLog(config.state_change_log, config.broker_id, component="broker")
            if config.state_change_log
            else None
        )
        self.replica_manager.isr.state_log = self.state_log

    def fence(self, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        """The error for a control request with these epochs; NONE accepts (and records) it."""
        if broker_epoch != -1 and broker_epoch < self.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        self.controller_epoch = controller_epoch
        if self.state_log is not None:  # (the epoch its own lines, e.g. isr_change, carry)
            self.state_log.controller_epoch = controller_epoch
        return ErrorCode.NONE

    def apply_credentials(self, pushed: Sequence[KmetaScramCredential] | None) -> None:
        """An accepted UpdateMetadata's credentials (None: it did not say) replace ours."""
        if pushed is None:
            return
        self.credentials.replace(
            (c.name, ScramCredential(MECHANISM_NAMES[c.mechanism], bytes(c.salt), bytes(c.stored_key), bytes(c.server_key), c.iterations))
            for c in pushed
            if c.mechanism in MECHANISM_NAMES
        )

    def topic_replicas_changed(self, topic: str) -> None:
        """A LeaderAndIsr applied ``topic``'s partition states (the replica manager follows)."""
        self.replica_manager.topic_replicas_changed(topic)
        self.coordinators.topic_replicas_changed(topic)

    def replica_stopped(self, topic: str, partition: int, delete: bool) -> None:
        """StopReplica dropped a replica's state (``delete``: its log goes too)."""
        self.coordinators.topic_replicas_changed(topic)
        self.replica_manager.stop_replica(topic, partition, delete)

    def metadata_applied(self, full: bool, deleted: Sequence[TopicPartitionKey] = ()) -> None:
        """An UpdateMetadata was applied to the cache (``full``: it replaced the whole state;
        ``deleted``: the partitions it removed, whose committed offsets the groups drop)."""
        self.coordinators.metadata_applied()
        if deleted:
            self.coordinators.partitions_deleted(deleted)
        if full and not self.holds_full_metadata:
            self.holds_full_metadata = True
            if self.on_full_metadata is not None:
                self.on_full_metadata()

    def close(self) -> None:
        self.coordinators.close()
        self.txn_coordinator.close()
        self.producer_ids.close()
        if self.state_log is not None:
            self.state_log.close()


#: a request's context on a broker: ``ctx.state`` is the broker's BrokerState
BrokerContext = RequestContext[BrokerState]
#: the broker's handlers (one per api key, kmeta.server.handlers)
BrokerRegistry = HandlerRegistry[BrokerState]
