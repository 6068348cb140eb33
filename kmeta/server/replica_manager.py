"""ReplicaManager: the partition replicas this broker holds and their logs (Kafka's
``kafka.server.ReplicaManager``), for Produce, Fetch and the log APIs built on them.

* Roles come from LeaderAndIsr (``ReplicaStates``); a :class:`Partition` and its log are made
  when a request first needs them (see :mod:`kmeta.server.partition` for why not eagerly),
  with the topic's configs from the MetadataCache (``snap.topic_configs``). A log already on
  disk is recovered by :meth:`startup` and found again by name; one whose topic id is not the
  topic's any more (a topic deleted and re-created while this broker was away) starts afresh.
* :meth:`get_partition_or_error` is Kafka's ``getPartitionOrError``: a replica held here, else
  NOT_LEADER_OR_FOLLOWER when the topic partition exists elsewhere, else
  UNKNOWN_TOPIC_OR_PARTITION; a log that cannot be opened is KAFKA_STORAGE_ERROR.
* Appends (:meth:`append_records`) go to the leader's log; the high watermark follows
  :meth:`Partition.maybe_increment_leader_hw`, and a move wakes the fetch purgatory.
* Reads (:meth:`read_from_log`, :meth:`fetch_messages`) follow ``readFromLog`` /
  ``fetchMessages``: the first non-empty partition's first batch is returned whole, later ones
  only within what is left of the request's max bytes; a fetch that finds too little waits in
  the purgatory (:mod:`kmeta.server.delayed_fetch`).
* StopReplica drops a replica (its waiting fetches are answered); with delete its log goes.
* Retention (``retention.ms`` / ``retention.bytes`` and the broker-wide memory cap) runs every
  ``log_retention_check_interval_ms``, and after an append that takes memory past the cap.
* The log cleaner (``log_cleaner_enable``, Kafka's cleaner thread) compacts one due log at a
  time: planned and installed on the loop, the cleaned bytes computed in a worker thread
  (kmeta.log.clean_task), so a large cleaning does not stall requests; it looks again
  ``log_cleaner_backoff_ms`` later when no log is due.
  Both first bring every log's config up to the metadata's topic configs, so a follower's log
  or one recovered but not yet served keeps its cleanup.policy (a compacted log is never
  cut by retention because its config went stale).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeAlias

from kmeta.log.clean_task import CleaningCancelled, CleanTask
from kmeta.log.config import LogConfig
from kmeta.log.errors import LogError, LogStorageError
from kmeta.log.log_manager import LogManager
from kmeta.log.partition_log import LogAppendInfo
from kmeta.log.record_set import RecordFormatError
from kmeta.metadata.cache import MetadataCache
from kmeta.metadata.model import TopicPartitionKey
from kmeta.protocol.errors import ErrorCode
from kmeta.server import replica_reads
from kmeta.server.config import BrokerConfig
from kmeta.server.delayed_fetch import FetchCallback, FetchParams, FetchPartitionInfo, LogReadResult
from kmeta.server.delayed_produce import DelayedProduce, ProduceCallback, ProducePending
from kmeta.server.fetcher_manager import ReplicaFetcherManager
from kmeta.server.follower_reads import unmade_read
from kmeta.server.isr_manager import IsrManager
from kmeta.server.partition import Partition
from kmeta.server.purgatory import DelayedOperationPurgatory
from kmeta.server.replica_states import LEADER, ReplicaState, ReplicaStates

log = logging.getLogger("kmeta.server.replica_manager")

#: Kafka's fetch.max.bytes: the most one Fetch answer carries, whatever the request asks
FETCH_MAX_BYTES = 57_671_680

#: the internal topics, written by their coordinators only (clients may not produce to them)
COORDINATOR_TOPICS = frozenset(("__consumer_offsets", "__transaction_state"))

#: an append's outcome: the log's answer, or the error (and its message)
AppendResult: TypeAlias = LogAppendInfo | tuple[ErrorCode, str | None]


class ReplicaManager:
    def __init__(self, config: BrokerConfig, replicas: ReplicaStates, cache: MetadataCache) -> None:
        self.broker_id = config.broker_id
        self.replicas = replicas
        self.cache = cache
        self.retention_check_s = config.log_retention_check_interval_ms / 1000.0
        self.producer_id_expiration_ms = config.producer_id_expiration_ms
        self.log_manager = LogManager(config.log_dir, config.log_memory_max_bytes)
        self.memory_max_bytes = config.log_memory_max_bytes
        self.delayed_fetch = DelayedOperationPurgatory("fetch")
        #: acks=-1 produces waiting for their high watermark (kmeta.server.delayed_produce)
        self.delayed_produce = DelayedOperationPurgatory("produce")
        self._partitions: dict[TopicPartitionKey, Partition] = {}
        #: topic -> its partitions made here (what a LeaderAndIsr of the topic may change)
        self._by_topic: dict[str, set[int]] = {}
        self._retention_timer: asyncio.TimerHandle | None = None
        self._cleaner_task: asyncio.Task[None] | None = None
        self._cleaning: CleanTask | None = None
        #: topic -> (its configs as the snapshot held them, the LogConfig built from them)
        self._log_configs: dict[str, tuple[Mapping[str, str] | None, LogConfig]] = {}
        self.cleaner_enabled = config.log_cleaner_enable
        self.cleaner_backoff_s = config.log_cleaner_backoff_ms / 1000.0
        #: this broker's epoch as the controller gave it (the broker state sets this; -1: none)
        self.broker_epoch_of: Callable[[], int] = lambda: -1
        #: the fetchers of the partitions this broker follows (kmeta.server.fetcher_manager)
        #: the ISR changes this broker proposes as leader (kmeta.server.isr_manager)
        self.isr = IsrManager(self, config.replica_lag_time_max_ms)
        self.fetchers = ReplicaFetcherManager(
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
        self._schedule_retention()
        if self.cleaner_enabled:
            with contextlib.suppress(RuntimeError):  # (no loop: in-memory tests, no cleaner)
                self._cleaner_task = asyncio.get_running_loop().create_task(self._cleaner_loop())
        self.isr.start()
        return len(loaded)

    def shutdown(self) -> None:
        """Answer every waiting fetch and produce, stop retention, flush and close the logs."""
        self.fetchers.shutdown()
        self.isr.stop()
        self.delayed_fetch.close()
        self.delayed_produce.close()
        if self._retention_timer is not None:
            self._retention_timer.cancel()
            self._retention_timer = None
        if self._cleaning is not None:
            self._cleaning.cancelled = True  # (its thread stops at its next batch)
        if self._cleaner_task is not None:
            self._cleaner_task.cancel()
            self._cleaner_task = None
        self._partitions.clear()
        self._by_topic.clear()
        try:
            self.log_manager.close()
        except LogError:  # (a flush that failed: the next start recovers what reached the files)
            log.exception("closing the partition logs failed")

    def _schedule_retention(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # (built outside a loop, as in-memory tests do: no timer)
            return
        self._retention_timer = loop.call_later(self.retention_check_s, self._retention_tick)

    def _retention_tick(self) -> None:
        self.enforce_retention()
        self.remove_expired_producers(int(time.time() * 1000))
        self._schedule_retention()

    def remove_expired_producers(self, now_ms: int) -> int:
        """producer.id.expiration.ms over every log (Kafka's removeExpiredProducers task)."""
        return sum(
            plog.producer_state.remove_expired(now_ms, self.producer_id_expiration_ms)
            for plog in self.log_manager.logs()
        )

    async def _cleaner_loop(self) -> None:
        await asyncio.sleep(self.cleaner_backoff_s)
        while True:
            if not await self.clean_logs():
                await asyncio.sleep(self.cleaner_backoff_s)

    async def clean_logs(self) -> bool:
        """One cleaning of the compacted log most due for one; True when one was cleaned."""
        self._refresh_log_configs()
        task = None
        try:
            task = self.log_manager.plan_clean(int(time.time() * 1000))
            if task is None:
                return False
            self._cleaning = task
            try:
                await asyncio.to_thread(task.compute)
            finally:
                self._cleaning = None
            result = self.log_manager.finish_clean(task)
        except CleaningCancelled:
            return False
        except LogStorageError as exc:  # (a segment file went meanwhile, or a disk error)
            log.warning("cleaning %s stopped: %s", task.log if task else "a log", exc)
            return False
        except (LogError, RecordFormatError):
            log.exception("cleaning %s failed: it is not cleaned again", task.log if task else "a log")
            if task is not None:
                self.log_manager.cleaner.uncleanable.add((task.log.topic, task.log.partition))
            return False
        if result is None:  # (the log changed while it was computed: planned afresh next)
            return True
        log.info(
            "cleaned %s: offsets %d-%d, %d -> %d bytes, %d -> %d segments", result.log,
            result.first_dirty_offset, result.end_offset, result.bytes_before,
            result.bytes_after, result.segments_before, result.segments_after,
        )  # fmt: skip
        return True

    def _refresh_log_configs(self) -> None:
        """Every log's config from the metadata's topic configs (a leader refreshes at each
        append; followers and recovered logs only here). A topic the metadata does not know
        keeps what it has."""
        snap = self.cache.snapshot
        built = self._log_configs
        for plog in self.log_manager.logs():
            configs = snap.topic_configs.get(plog.topic)
            if configs is None and snap.topic_id(plog.topic) is None:
                continue
            cached = built.get(plog.topic)
            if cached is None or cached[0] is not configs:  # (an unchanged mapping is shared)
                cached = built[plog.topic] = (configs, LogConfig.from_topic_configs(configs or {}))
            if cached[1] != plog.config:
                plog.update_config(cached[1])

    def enforce_retention(self) -> int:
        """``LogManager.cleanupLogs``: bytes freed. (A fetch waiting at a log end the log start
        passed is answered OFFSET_OUT_OF_RANGE when next woken or timed out, as in Kafka.)"""
        self._refresh_log_configs()
        try:
            return self.log_manager.enforce_retention(int(time.time() * 1000))
        except LogError:
            log.exception("retention failed")
            return 0

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
        one was recovered: see :mod:`kmeta.server.follower_reads`)."""
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

    # -- appends ------------------------------------------------------------------------------
    def append_records(
        self, partition: Partition, records: bytes, acks: int, min_insync_replicas: int,
        coordinator: bool | None = None,
    ) -> AppendResult:  # fmt: skip
        """``Partition.appendRecordsToLeader``: one checked batch onto the leader's log.
        ``coordinator`` (Kafka's AppendOrigin.COORDINATOR: no sequence checks, no duplicates)
        defaults to whether the topic is an internal one, which only coordinators write."""
        state = partition.state
        if state is None or state.role != LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        if acks == -1 and len(state.isr) < min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS, None
        partition.refresh_config(self.cache.snapshot.topic_configs.get(partition.topic))
        try:
            if coordinator is None:
                coordinator = partition.topic in COORDINATOR_TOPICS
            info = partition.log.append_as_leader(
                records, state.leader_epoch, int(time.time() * 1000), coordinator=coordinator
            )
        except LogError as exc:
            return exc.error, str(exc) or None
        return self._appended(partition, state, info)

    def append_txn_marker(
        self, partition: Partition, producer_id: int, producer_epoch: int, coordinator_epoch: int,
        commit: bool, min_insync_replicas: int,
    ) -> AppendResult:  # fmt: skip
        """WriteTxnMarkers' append (Kafka's appendRecords with origin COORDINATOR, acks=-1):
        one control batch onto the leader's log (:meth:`Partition.write_txn_marker`)."""
        state = partition.state
        if state is None or state.role != LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        if len(state.isr) < min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS, None
        info = partition.write_txn_marker(producer_id, producer_epoch, coordinator_epoch, commit)
        if not isinstance(info, LogAppendInfo):
            return info
        return self._appended(partition, state, info)

    def _appended(self, partition: Partition, state: ReplicaState, info: LogAppendInfo) -> AppendResult:
        self.bytes_in += info.size_in_bytes
        self.messages_in += info.record_count
        if partition.maybe_increment_leader_hw(state):
            self.high_watermark_moved(partition)
        else:  # (followers long-polling at the old log end read the batch now)
            self.delayed_fetch.check_and_complete(partition.key)
        if self.log_manager.memory_bytes > self.memory_max_bytes:
            self.enforce_retention()
        return info

    def await_replication(
        self, pending: dict[tuple[str, int], ProducePending], timeout_ms: int, callback: ProduceCallback
    ) -> None:
        """acks=-1 after the appends: ``callback`` gets each partition's answer once its high
        watermark covers its batch (now, or from the produce purgatory), or at ``timeout_ms``
        REQUEST_TIMED_OUT for those still waiting."""
        delayed = DelayedProduce(timeout_ms, pending, self, callback)
        self.delayed_produce.try_complete_else_watch(delayed, list(pending))

    # -- reads (kmeta.server.replica_reads) ---------------------------------------------------
    def read_from_log(self, params: FetchParams, partitions: Sequence[FetchPartitionInfo]) -> list[LogReadResult]:
        return replica_reads.read_from_log(self, params, partitions)

    def fetch_messages(
        self, params: FetchParams, partitions: Sequence[FetchPartitionInfo], callback: FetchCallback
    ) -> None:
        replica_reads.fetch_messages(self, params, partitions, callback)

    def unmade_read(self, params: FetchParams, part: FetchPartitionInfo) -> LogReadResult | None:
        """:func:`kmeta.server.follower_reads.unmade_read`: a follower's read of a log not made."""
        return unmade_read(self, params, part)

    # -- status -------------------------------------------------------------------------------
    def under_replicated(self) -> tuple[int, int]:
        """(led partitions whose ISR is smaller than their replicas, those whose ISR is
        smaller than their min.insync.replicas): over the partitions made here."""
        under = under_min = 0
        configs = self.cache.snapshot.topic_configs
        for partition in self.led_partitions():
            state = partition.state
            if state is None:
                continue
            under += len(state.isr) < len(state.replicas)
            try:
                min_isr = int(configs.get(partition.topic, {}).get("min.insync.replicas", 1))
            except ValueError:
                min_isr = 1
            under_min += len(state.isr) < min_isr
        return under, under_min

    def log_totals(self) -> tuple[int, int, int]:
        """(logs held, their bytes, bytes held in memory): broker-wide, for /metrics."""
        count = size = 0
        for plog in self.log_manager.logs():
            count += 1
            size += plog.size_in_bytes
        return count, size, self.log_manager.memory_bytes
