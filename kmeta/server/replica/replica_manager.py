"""ReplicaManager: the partition replicas this broker holds and their logs (Kafka's
``kafka.server.ReplicaManager``), for Produce, Fetch and the log APIs built on them.

* Roles come from LeaderAndIsr (``ReplicaStates``); a :class:`Partition` and its log are made
  when a request first needs them (see :mod:`kmeta.server.replica.partition` for why not eagerly),
  with the topic's configs from the MetadataCache (``snap.topic_configs``). A log already on
  disk is recovered by :meth:`startup` and found again by name; one whose topic id is not the
  topic's any more (a topic deleted and re-created while this broker was away) starts afresh.
* :meth:`get_partition_or_error` is Kafka's ``getPartitionOrError``: a replica held here, else
  NOT_LEADER_OR_FOLLOWER when the topic partition exists elsewhere, else
  UNKNOWN_TOPIC_OR_PARTITION; a log that cannot be opened is KAFKA_STORAGE_ERROR.
* Appends (:meth:`append_records`, :mod:`kmeta.server.replica.replica_appends`) go to the leader's
  log; the high watermark follows :meth:`Partition.maybe_increment_leader_hw`, and a move
  wakes the fetch purgatory; inside :meth:`actions` (a Produce's appends) the followers
  waiting at the old log ends are woken once all are done (Kafka's action queue).
* Reads (:meth:`read_from_log`, :meth:`fetch_messages`) follow ``readFromLog`` /
  ``fetchMessages``: the first non-empty partition's first batch is returned whole, later ones
  only within what is left of the request's max bytes; a fetch that finds too little waits in
  the purgatory (:mod:`kmeta.server.replica.delayed_fetch`).
* StopReplica drops a replica (its waiting fetches are answered); with delete its log goes.
* Retention, producer expiry and the log cleaner run in the background
  (:mod:`kmeta.server.log_tasks`); retention also after an append that takes memory past the
  broker-wide cap.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from kmeta.log.config import LogConfig
from kmeta.log.errors import LogError
from kmeta.log.log_manager import LogManager
from kmeta.metadata.cache import MetadataCache
from kmeta.metadata.model import TopicPartitionKey
from kmeta.protocol.errors import ErrorCode
from kmeta.server.config import BrokerConfig
from kmeta.server.log_tasks import LogTasks
from kmeta.server.replica import replica_appends, replica_reads
from kmeta.server.replica.delayed_fetch import (
    FetchCallback,
    FetchParams,
    FetchPartitionInfo,
    LogReadResult,
)
from kmeta.server.replica.delayed_produce import DelayedProduce, ProduceCallback, ProducePending
from kmeta.server.replica.follower_reads import unmade_read
from kmeta.server.replica.isr_manager import IsrManager
from kmeta.server.replica.partition import Partition
from kmeta.server.replica.purgatory import DelayedOperationPurgatory
from kmeta.server.replica.replica_appends import AppendResult
from kmeta.server.replica.replica_states import LEADER, ReplicaState, ReplicaStates

log = logging.getLogger("kmeta.server.replica_manager")

#: Kafka's fetch.max.bytes: the most one Fetch answer carries, whatever the request asks
FETCH_MAX_BYTES = 57_671_680


class FetcherManager(Protocol):
    """The follower's fetchers as the replica manager drives them (Kafka's
    ``ReplicaFetcherManager``: :mod:`kmeta.server.fetcher`, above this package)."""

    @property
    def fetchers(self) -> Mapping[int, object]:
        """Leader broker id -> its fetcher."""

    def follow(self, key: TopicPartitionKey, state: ReplicaState, partition: Partition | None) -> None: ...
    def unfollow(self, key: TopicPartitionKey) -> None: ...
    def following(self) -> int: ...
    def shutdown(self) -> None: ...


#: makes the fetchers: ``(config, cache, replicas, partition_of, made, broker_epoch)``, where
#: ``partition_of`` makes a followed partition's log and ``made`` only finds one
FetcherManagerFactory = Callable[
    [
        BrokerConfig, MetadataCache, ReplicaStates,
        Callable[[TopicPartitionKey], Partition | None],
        Callable[[TopicPartitionKey], Partition | None],
        Callable[[], int],
    ],
    FetcherManager,
]  # fmt: skip


class ReplicaManager:
    def __init__(
        self, config: BrokerConfig, replicas: ReplicaStates, cache: MetadataCache,
        fetcher_manager: FetcherManagerFactory,
    ) -> None:  # fmt: skip
        self.broker_id = config.broker_id
        self.replicas = replicas
        self.cache = cache
        self.log_manager = LogManager(config.log_dir, config.log_memory_max_bytes)
        #: retention, producer expiry and the log cleaner (kmeta.server.log_tasks)
        self.log_tasks = LogTasks(config, self.log_manager, cache)
        self.memory_max_bytes = config.log_memory_max_bytes
        self.delayed_fetch = DelayedOperationPurgatory("fetch")
        #: acks=-1 produces waiting for their high watermark (kmeta.server.replica.delayed_produce)
        self.delayed_produce = DelayedOperationPurgatory("produce")
        #: the partitions appended to inside ``actions()``, whose waiting fetches are checked
        #: at its end (kmeta.server.replica.replica_appends); None: outside, checked at each append
        self.fetch_wakes: dict[TopicPartitionKey, None] | None = None
        self._partitions: dict[TopicPartitionKey, Partition] = {}
        #: topic -> its partitions made here (what a LeaderAndIsr of the topic may change)
        self._by_topic: dict[str, set[int]] = {}
        #: this broker's epoch as the controller gave it (the broker state sets this; -1: none)
        self.broker_epoch_of: Callable[[], int] = lambda: -1
        #: the ISR changes this broker proposes as leader (kmeta.server.replica.isr_manager)
        self.isr = IsrManager(self, config.replica_lag_time_max_ms)
        #: the fetchers of the partitions this broker follows (kmeta.server.fetcher.fetcher_manager)
        self.fetchers = fetcher_manager(
            config, cache, replicas, lambda key: self.get_partition_or_error(*key)[0],
            self._partitions.get, lambda: self.broker_epoch_of(),
        )  # fmt: skip
        #: told after every high watermark move (the coordinator runtimes replay what committed)
        self.on_high_watermark: Callable[[Partition], None] | None = None
        #: broker-wide totals for /metrics (Kafka's BytesInPerSec, MessagesInPerSec, BytesOutPerSec)
        self.bytes_in = 0
        self.messages_in = 0
        self.bytes_out = 0

    # -- lifecycle ----------------------------------------------------------------------------
    def startup(self) -> int:
        """Recover the log dir (every batch CRC-checked, a torn tail cut); start retention.
        Returns the number of logs found. A partition dir that cannot be read is left out and
        said at WARN (the others serve; Kafka would take the whole dir offline)."""
        loaded = self.log_manager.load()
        for name, reason in self.log_manager.load_errors:
            log.warning("log %s not loaded: %s", name, reason)
        for name, what in self.log_manager.load_warnings:
            log.warning("log %s: %s", name, what)
        self.log_tasks.start()
        self.isr.start()
        return len(loaded)

    def shutdown(self) -> None:
        """Answer every waiting fetch and produce, stop retention, flush and close the logs."""
        self.fetchers.shutdown()
        self.isr.stop()
        self.delayed_fetch.close()
        self.delayed_produce.close()
        self.log_tasks.stop()
        self._partitions.clear()
        self._by_topic.clear()
        try:
            self.log_manager.close()
        except LogError:  # (a flush that failed: the next start recovers what reached the files)
            log.exception("closing the partition logs failed")

    def enforce_retention(self) -> int:
        """:meth:`kmeta.server.log_tasks.LogTasks.enforce_retention` now (the memory cap)."""
        return self.log_tasks.enforce_retention()

    # -- partitions ---------------------------------------------------------------------------
    def get_partition_or_error(self, topic: str, index: int) -> tuple[Partition | None, ErrorCode]:
        partition, _, error = self._lookup(topic, index)
        return partition, error

    def leader_partition_or_error(self, topic: str, index: int) -> tuple[Partition | None, ErrorCode]:
        """The partition when this broker leads it (``getPartitionAndLeaderReplicaIfLocal``)."""
        partition, state, error = self._lookup(topic, index)
        if state is not None and state.role != LEADER:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return partition, error

    def _lookup(self, topic: str, index: int) -> tuple[Partition | None, ReplicaState | None, ErrorCode]:
        key = (topic, index)
        state = self.replicas.get(key)
        if state is None:
            if key in self._partitions:
                self._forget(key)
            known = self.cache.snapshot.partition(topic, index) is not None
            return None, None, ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        partition = self._partitions.get(key)
        if partition is None:
            try:
                partition = self._make(topic, index, state)
            except LogError as exc:
                log.error("cannot open the log of %s-%d: %s", topic, index, exc)
                return None, None, ErrorCode.KAFKA_STORAGE_ERROR
        return partition, state, ErrorCode.NONE

    def current_leader(self, topic: str, index: int) -> tuple[int, int]:
        """(leader id, leader epoch) for KIP-951's hints (``KafkaApis.getCurrentLeader``): this
        broker's replica state first (a LeaderAndIsr arrives before its UpdateMetadata), else
        the MetadataCache's; (-1, -1) when neither knows the partition."""
        state = self.replicas.get((topic, index))
        if state is not None:
            return state.leader, state.leader_epoch
        cached = self.cache.snapshot.partition(topic, index)
        return (-1, -1) if cached is None else (cached.leader, cached.leader_epoch)

    def led_partitions(self) -> list[Partition]:
        """The partitions made here that this broker leads."""
        return [p for p in self._partitions.values() if p.is_leader]

    def is_made(self, key: TopicPartitionKey) -> bool:
        """The partition's Partition (and log) was made here."""
        return key in self._partitions

    def _make(self, topic: str, index: int, state: ReplicaState) -> Partition:
        snap = self.cache.snapshot
        topic_id = state.topic_id if state.topic_id is not None else snap.topic_id(topic)
        configs = snap.topic_configs.get(topic)
        # (a log of another topic id, the topic deleted and re-created while this broker was
        # away, is deleted and started afresh by the log manager)
        plog = self.log_manager.get_or_create(
            topic, index, topic_id, LogConfig.from_topic_configs(configs or {})
        )
        partition = Partition(topic, index, self.broker_id, self.replicas, plog, configs)
        self._partitions[(topic, index)] = partition
        self._by_topic.setdefault(topic, set()).add(index)
        partition.make_leader_or_follower()
        return partition

    def _forget(self, key: TopicPartitionKey) -> None:
        self.fetchers.unfollow(key)
        self._partitions.pop(key, None)
        indexes = self._by_topic.get(key[0])
        if indexes is not None:
            indexes.discard(key[1])
            if not indexes:
                del self._by_topic[key[0]]
        self.delayed_fetch.check_and_complete(key)
        self.delayed_produce.check_and_complete(key)

    def high_watermark_moved(self, partition: Partition) -> None:
        """Wake what waits on ``partition``'s high watermark: consumers' fetches, acks=-1
        produces (Kafka's ``tryCompleteDelayedRequests``)."""
        self.delayed_fetch.check_and_complete(partition.key)
        self.delayed_produce.check_and_complete(partition.key)
        if self.on_high_watermark is not None:
            self.on_high_watermark(partition)

    def topic_replicas_changed(self, topic: str) -> None:
        """A LeaderAndIsr changed ``topic``'s replica states: the partitions made here follow
        (a new leader's high watermark; a dropped one forgotten), their waiting fetches and
        produces are checked again (a leader that became follower answers them
        NOT_LEADER_OR_FOLLOWER), and each partition this broker follows is fetched from its
        leader (``ReplicaManager.makeFollowers``; its log is made when records come, unless
        one was recovered: see :mod:`kmeta.server.replica.follower_reads`)."""
        for index in list(self._by_topic.get(topic, ())):
            key = (topic, index)
            partition = self._partitions[key]
            if partition.state is None:
                self._forget(key)
                continue
            partition.make_leader_or_follower()
            if partition.is_leader:
                self.fetchers.unfollow(key)
            self.delayed_fetch.check_and_complete(key)
            self.delayed_produce.check_and_complete(key)
        for index in self.replicas.indexes(topic):
            key = (topic, index)
            state = self.replicas.get(key)
            if state is None or state.role == LEADER:
                continue
            followed = self._partitions.get(key)
            if followed is None and self.log_manager.get(topic, index) is not None:
                followed, _ = self.get_partition_or_error(topic, index)  # (a recovered log)
            self.fetchers.follow(key, state, followed)

    def stop_replica(self, topic: str, index: int, delete: bool) -> None:
        """StopReplica for a partition whose replica state was dropped: waiting fetches are
        answered; with ``delete`` the log goes too (a deleted topic, a moved replica)."""
        self._forget((topic, index))
        if delete:
            try:
                self.log_manager.delete(topic, index)
            except LogError:
                log.exception("cannot delete the log of %s-%d", topic, index)

    # -- appends (kmeta.server.replica.replica_appends) ----------------------------------------------
    def append_records(
        self, partition: Partition, records: bytes | memoryview, acks: int, min_insync_replicas: int,
        coordinator: bool | None = None, crc_checked: bool = False,
    ) -> AppendResult:  # fmt: skip
        return replica_appends.append_records(
            self, partition, records, acks, min_insync_replicas, coordinator, crc_checked
        )

    def actions(self) -> AbstractContextManager[None]:
        """:func:`kmeta.server.replica.replica_appends.actions`: the appends made inside wake the
        fetches waiting on their partitions at the end, once (Kafka's ActionQueue)."""
        return replica_appends.actions(self)

    def append_txn_marker(
        self, partition: Partition, producer_id: int, producer_epoch: int, coordinator_epoch: int,
        commit: bool, min_insync_replicas: int,
    ) -> AppendResult:  # fmt: skip
        return replica_appends.append_txn_marker(
            self, partition, producer_id, producer_epoch, coordinator_epoch, commit, min_insync_replicas
        )

    def await_replication(
        self, pending: dict[tuple[str, int], ProducePending], timeout_ms: int, callback: ProduceCallback
    ) -> None:
        """acks=-1 after the appends: ``callback`` gets each partition's answer once its high
        watermark covers its batch (now, or from the produce purgatory), or at ``timeout_ms``
        REQUEST_TIMED_OUT for those still waiting."""
        delayed = DelayedProduce(timeout_ms, pending, self, callback)
        self.delayed_produce.try_complete_else_watch(delayed, list(pending))

    # -- reads (kmeta.server.replica.replica_reads) ---------------------------------------------------
    def read_from_log(self, params: FetchParams, partitions: Sequence[FetchPartitionInfo]) -> list[LogReadResult]:
        return replica_reads.read_from_log(self, params, partitions)

    def fetch_messages(
        self, params: FetchParams, partitions: Sequence[FetchPartitionInfo], callback: FetchCallback
    ) -> None:
        replica_reads.fetch_messages(self, params, partitions, callback)

    def unmade_read(self, params: FetchParams, part: FetchPartitionInfo) -> LogReadResult | None:
        """:func:`kmeta.server.replica.follower_reads.unmade_read`: a follower's read of a log not made."""
        return unmade_read(self, params, part)
