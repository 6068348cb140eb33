"""The replication side of a partition log, a part of
:class:`~kmeta.log.partition_log.PartitionLog` of its own (Kafka's ``UnifiedLog.appendAsFollower``,
``truncateTo``, ``truncateFullyAndStartAt`` and the leader-epoch queries of KIP-101/279):
a follower appends the leader's batches as they are, asks the leader where an epoch ended
(OffsetForLeaderEpoch, answered here from the epoch cache) and cuts its log there; the
producer state follows the cut (:meth:`kmeta.log.producer.log_producers.LogProducers.truncated`).

A mixin: its methods use the log's segments, epoch cache, offsets and ``_store``, as
:class:`_Log` says, and keep PartitionLog's invariants (whatever raises leaves the log as it
was)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, NamedTuple, Protocol

from kmeta.log.errors import OffsetOutOfRangeError
from kmeta.log.record.batch import walk_batches

if TYPE_CHECKING:
    from kmeta.log.append_info import LogAppendInfo
    from kmeta.log.epoch_cache import LeaderEpochFileCache
    from kmeta.log.local_log import LocalLog
    from kmeta.log.producer.log_producers import LogProducers
    from kmeta.log.record.batch import Buffer
    from kmeta.protocol.records.record_batch import BatchHeader


class EpochEndOffset(NamedTuple):
    leader_epoch: int  # -1 when unknown
    end_offset: int  # -1 when unknown


class _Log(Protocol):
    """What of PartitionLog the replication side uses."""

    local: LocalLog
    _epochs: LeaderEpochFileCache
    _producers: LogProducers
    _log_start_offset: int
    _high_watermark: int

    @property
    def log_end_offset(self) -> int: ...

    def _store(self, data: Buffer, prefix: bytes | None, batches: list[tuple[int, BatchHeader]], now_ms: int) -> None: ...

    def _move_log_start(self, offset: int) -> None: ...

    def _appended(self, batches: list[BatchHeader], size: int) -> LogAppendInfo: ...

    def truncate_fully_and_start_at(self, offset: int) -> None: ...


class ReplicaLog:
    __slots__ = ()

    def append_as_follower(self: _Log, records: bytes | memoryview) -> LogAppendInfo | None:
        """Append batches as a leader's Fetch returned them (offsets and epochs set): each
        CRC-checked, the first at the log end, each following the one before; a trailing
        partial batch is ignored. None when there is no whole batch."""
        walked = walk_batches(records, self.log_end_offset)
        if walked.problem is not None:
            raise walked.problem
        if not walked.batches:
            return None
        data = memoryview(records)[: walked.valid_bytes]
        self._store(data, None, walked.batches, int(time.time() * 1000))
        return self._appended([h for _, h in walked.batches], walked.valid_bytes)

    def maybe_assign_epoch_start_offset(self: _Log, leader_epoch: int, start_offset: int) -> None:
        """A new leader's epoch starts at its log end before it appends anything (Kafka's
        ``Partition.makeLeader``), so OffsetForLeaderEpoch answers right at once."""
        self._epochs.assign(leader_epoch, start_offset)

    def end_offset_for_epoch(self: _Log, leader_epoch: int) -> EpochEndOffset:
        """OffsetForLeaderEpoch (Kafka's ``LeaderEpochFileCache.endOffsetFor``)."""
        epoch, offset = self._epochs.end_offset_for(leader_epoch, self.log_end_offset)
        return EpochEndOffset(-1, -1) if offset == -1 else EpochEndOffset(epoch, offset)

    def truncate_to(self: _Log, offset: int) -> None:
        """Follower truncation: the log ends before ``offset`` (a batch is never split); past
        its end an epoch begun there goes (Kafka's truncateTo). Below the first segment: afresh."""
        if offset < 0:
            raise OffsetOutOfRangeError(f"Cannot truncate {self} to a negative offset ({offset})")
        if offset >= self.log_end_offset:
            return self._epochs.truncate_from_end(self.log_end_offset)
        if offset < self.local.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return
        self.local.truncate_to(offset)
        end = self.log_end_offset
        self._epochs.truncate_from_end(end)
        if end < self._log_start_offset:
            self._move_log_start(end)
        self._high_watermark = min(self._high_watermark, end)
        self._producers.truncated(end, self.local.segments, self._log_start_offset)

    def truncate_fully_and_start_at(self: _Log, offset: int) -> None:
        """Drop every segment; the log is empty and its next offset is ``offset``."""
        self.local.truncate_fully(offset)
        self._producers.clear()
        self._epochs.clear()
        self._move_log_start(offset)
        self._high_watermark = offset
