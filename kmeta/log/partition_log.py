"""A partition replica's log (Kafka's ``UnifiedLog``): record batches kept as received, the
log start and end offsets, the high watermark, the leader-epoch cache, retention.

Pure data: no asyncio, no sockets, no logging. The owner (the broker's replica manager)
serialises calls and decides what the high watermark is; this class keeps the invariants
``log_start_offset <= high_watermark <= log_end_offset`` and that whatever raises leaves the
log as it was. Segments live in memory, or in files under ``<log dir>/<topic>-<partition>/``
recovered at start (:mod:`kmeta.log.log_loader`); ``local`` (Kafka's ``localLog``) holds
them, for reading only from outside. The replication side (a follower's appends, truncation,
the epoch queries) is :class:`~kmeta.log.replica_log.ReplicaLog`'s, what goes from its start
(DeleteRecords, retention, the memory cap) :class:`~kmeta.log.retention.LogRetention`'s.
"""

from __future__ import annotations

import os
import uuid
from typing import NamedTuple

from kmeta.log import checkpoints
from kmeta.log.append_info import LogAppendInfo
from kmeta.log.config import LogConfig
from kmeta.log.epoch_cache import CHECKPOINT_FILE, LeaderEpochFileCache
from kmeta.log.errors import (
    LogStorageError,
    OffsetOutOfRangeError,
)
from kmeta.log.list_offsets import fetch_offset_by_timestamp
from kmeta.log.local_log import LocalLog
from kmeta.log.log_loader import recover
from kmeta.log.producer.log_producers import LogProducers
from kmeta.log.record.batch import (
    NO_EPOCH,
    Buffer,
    header_at,
)
from kmeta.log.record.control import end_txn_marker_batch
from kmeta.log.record.record_set import check_keys
from kmeta.log.record.validator import validate_leader_batch
from kmeta.log.replica_log import ReplicaLog
from kmeta.log.retention import LogRetention
from kmeta.log.stores import MemoryAccount
from kmeta.protocol.records.record_batch import BatchHeader

Batches = list[tuple[int, BatchHeader]]  # (position in the bytes, header) of each batch


class FetchDataInfo(NamedTuple):
    records: bytes | memoryview  # whole stored batches, byte for byte
    fetch_offset: int


class PartitionLog(ReplicaLog, LogRetention):
    __slots__ = (
        "_epochs",
        "_high_watermark",
        "_log_start_offset",
        "_producers",
        "config",
        "dir",
        "local",
        "partition",
        "producer_state",
        "recovery_warnings",
        "topic",
        "topic_id",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID | None,
        config: LogConfig,
        *,
        log_dir: str | None = None,
        memory: MemoryAccount | None = None,
    ) -> None:
        """In memory (``log_dir`` None: segments count against ``memory``), else in
        ``<log_dir>/<topic>-<partition>/``, recovered from what that directory holds."""
        self.topic, self.partition, self.topic_id = topic, partition, topic_id
        self.config = config
        self.dir = os.path.join(log_dir, f"{topic}-{partition}") if log_dir is not None else None
        self.local = LocalLog(self.dir, memory, config.index_interval_bytes, self._dir_created)
        self._epochs = LeaderEpochFileCache(
            os.path.join(self.dir, CHECKPOINT_FILE) if self.dir else None, self.local.ensure_dir
        )
        self._log_start_offset = 0
        self._high_watermark = 0
        #: idempotent/transactional producers and their snapshot files (kmeta.log.producer.log_producers)
        self._producers = LogProducers(self.dir, self.local.ensure_dir)
        self.producer_state = self._producers.state
        #: what recovery ignored (a corrupt snapshot file): the owner logs it
        self.recovery_warnings: list[str] = []
        if self.dir is not None and (recovery := self._producers.recovery()) is not None:
            self._log_start_offset, self._high_watermark, found_id = recover(
                self.dir, self.local, self._epochs, recovery.on_batch
            )
            self.topic_id = self.topic_id or found_id
            self.recovery_warnings = recovery.finish(self.local.segments, self._log_start_offset)
        else:
            self.local.start_at(0)

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.local.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def last_stable_offset(self) -> int:
        """``UnifiedLog.lastStableOffset`` (:meth:`ProducerStateManager.last_stable_offset`)."""
        return self.producer_state.last_stable_offset(self._high_watermark)

    @property
    def size_in_bytes(self) -> int:
        return self.local.size_in_bytes

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs.latest_epoch

    def update_high_watermark(self, offset: int) -> bool:
        """Set the high watermark, clamped to [log start, log end]; True if it moved."""
        offset = min(max(offset, self._log_start_offset), self.log_end_offset)
        moved, self._high_watermark = offset != self._high_watermark, offset
        return moved

    def update_config(self, config: LogConfig) -> None:
        self.config = config  # a smaller segment.bytes rolls at the next append

    def append_as_leader(
        self, records: bytes | memoryview, leader_epoch: int, now_ms: int, *,
        coordinator: bool = False, crc_checked: bool = False,
    ) -> LogAppendInfo:  # fmt: skip
        """Append one client batch (magic 2) at the log end, checked and set as
        :func:`~kmeta.log.record.validator.validate_leader_batch` says (on a compacted topic every
        record needs a key); the epoch is recorded in the cache when it starts here; a producer
        id's batch passes the producer state's checks (a ``coordinator``'s, Kafka's origin
        COORDINATOR, only its epoch and transaction's), a retry answered with the original's
        offsets. Raises a LogError, nothing stored. ``crc_checked``: the caller checked these
        immutable bytes' CRC already (:func:`~kmeta.protocol.records.record_batch.check_produce_records`)."""
        v = validate_leader_batch(
            records, self.config, self.log_end_offset, leader_epoch, now_ms, crc_checked=crc_checked
        )
        h = v.header
        if self.config.compact:
            check_keys(v.data, h, str(self))
        # (h.producer_id: the one test a plain producer's batch costs)
        duplicate = self._producers.check_leader_batch(h, coordinator) if h.producer_id >= 0 else None
        if duplicate is not None:
            return LogAppendInfo.duplicate(duplicate, self._log_start_offset)
        self._store(v.data, v.prefix, [(0, h)], now_ms)
        return LogAppendInfo.of([h], self._log_start_offset, len(v.data), v.log_append_time_ms)

    def append_end_txn_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
        leader_epoch: int, now_ms: int,
    ) -> LogAppendInfo:  # fmt: skip
        """WriteTxnMarkers at the leader: a COMMIT or ABORT control batch once its epochs pass
        ``ProducerStateManager.check_marker``; it completes the producer's transaction."""
        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        data = end_txn_marker_batch(
            producer_id, producer_epoch, coordinator_epoch, commit, now_ms, self.log_end_offset, leader_epoch
        )
        h = header_at(data)
        self._store(data, None, [(0, h)], now_ms)
        return LogAppendInfo.of([h], self._log_start_offset, len(data))

    def _store(self, data: Buffer, prefix: bytes | None, batches: Batches, now_ms: int) -> None:
        """Write, then record the epochs the batches start; a failed epoch checkpoint takes
        the write back, so an append is all or nothing. Then the batches with a producer id
        update the producer state (checked before, by the leader's append)."""
        saved = list(self._epochs.entries)
        config, active = self.config, self.local.active
        self.local.append(data, prefix, batches, now_ms, config.segment_bytes, config.segment_ms)
        if self.local.active is not active:  # (rolled: the state before the new segment)
            self._producers.take_snapshot(self.local.active.base_offset)
        try:
            for _, h in batches:
                if h.partition_leader_epoch != NO_EPOCH:
                    self._epochs.assign(h.partition_leader_epoch, h.base_offset)
        except LogStorageError:
            self._epochs.entries = saved
            self.local.truncate_to(batches[0][1].base_offset)
            raise
        self._producers.stored(data, batches)

    def _appended(self, batches: list[BatchHeader], size: int) -> LogAppendInfo:
        return LogAppendInfo.of(batches, self._log_start_offset, size)

    def read(
        self, fetch_offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool = True
    ) -> FetchDataInfo:
        """Whole stored batches from the one holding ``fetch_offset``, at most ``max_bytes``
        of them (the first whole when ``min_one_batch``, as Kafka's minOneMessage), only
        batches that end below ``max_offset`` (the high watermark or last stable offset a
        consumer may see). One segment per read, as Kafka."""
        if fetch_offset < self._log_start_offset or fetch_offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"Received request for offset {fetch_offset} for partition {self}, "
                f"but we only have log segments in the range {self._log_start_offset} to {self.log_end_offset}."
            )
        if fetch_offset == self.log_end_offset:
            return FetchDataInfo(b"", fetch_offset)
        return FetchDataInfo(
            self.local.read(fetch_offset, max_bytes, max_offset, min_one_batch), fetch_offset
        )

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """ListOffsets: ``(offset, timestamp, leader epoch)`` or None, exact per record but for
        snappy/lz4/zstd batches (batch granularity; :mod:`kmeta.log.list_offsets`)."""
        return fetch_offset_by_timestamp(
            timestamp, self.local, self._epochs, self._log_start_offset
        )

    def _move_log_start(self, offset: int) -> None:
        self._checkpoint(checkpoints.LOG_START_FILE, offset)
        self._epochs.truncate_from_start(offset)
        self._log_start_offset = offset
        self._high_watermark = max(self._high_watermark, offset)
        self.producer_state.truncate_head(offset)

    def _dir_created(self) -> None:
        if self.dir is not None and self.topic_id is not None:
            checkpoints.write_partition_metadata(self.dir, self.topic_id)

    def _checkpoint(self, name: str, offset: int) -> None:
        if self.dir is not None:
            ensure = self.local.ensure_dir
            checkpoints.write_offset(self.dir, name, self.topic, self.partition, offset, ensure)

    def flush(self) -> None:
        """fsync the segments written since the last flush, and checkpoint the high watermark."""
        self.local.flush()
        if self.dir is not None and os.path.isdir(self.dir):
            self._checkpoint(checkpoints.HIGH_WATERMARK_FILE, self._high_watermark)

    def close(self) -> None:
        """Flush, then a producer snapshot at the log end (a clean restart replays nothing)."""
        try:
            self.flush()
            self._producers.take_snapshot(self.log_end_offset)
        finally:
            self.local.close()

    def delete_files(self) -> None:
        """Close and drop everything this log holds (its directory is the caller's)."""
        self.local.truncate_fully(self.log_end_offset)
        self._producers.clear()
        self.local.close()
