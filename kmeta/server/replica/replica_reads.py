"""The replica manager's reads (Kafka's ``ReplicaManager.readFromLog`` / ``fetchMessages``), a
part of :class:`~kmeta.server.replica.replica_manager.ReplicaManager` of their own.

Each partition is read in order; the first non-empty one's first batch is returned whole, later
ones only within what is left of the request's max bytes; a fetch that finds too little waits
in the purgatory (:mod:`kmeta.server.replica.delayed_fetch`). A follower's fetch records its log end
on the leader's partition (moving the high watermark, perhaps bringing it back into the ISR)
before the read, so the answer carries the high watermark it moved.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kmeta.log.errors import LogError, OffsetOutOfRangeError
from kmeta.log.partition_log import PartitionLog
from kmeta.log.record.batch import headers, last_offset
from kmeta.metadata.cache import MetadataCache
from kmeta.protocol.errors import ErrorCode
from kmeta.server.replica.delayed_fetch import (
    DelayedFetch,
    FetchCallback,
    FetchIsolation,
    FetchParams,
    FetchPartitionInfo,
    LogReadResult,
    diverging,
)
from kmeta.server.replica.follower_reads import follower_error
from kmeta.server.replica.isr_manager import IsrManager
from kmeta.server.replica.partition import Partition
from kmeta.server.replica.purgatory import DelayedOperationPurgatory


class Reader(Protocol):
    """The replica manager as its reads use it: the partitions, the ISR a follower's fetch
    may widen, the purgatory a short read waits in, the bytes-out total."""

    bytes_out: int

    @property
    def broker_id(self) -> int: ...
    @property
    def cache(self) -> MetadataCache: ...
    @property
    def isr(self) -> IsrManager: ...
    @property
    def delayed_fetch(self) -> DelayedOperationPurgatory: ...
    def get_partition_or_error(self, topic: str, index: int) -> tuple[Partition | None, ErrorCode]: ...
    def unmade_read(self, params: FetchParams, part: FetchPartitionInfo) -> LogReadResult | None: ...
    def read_from_log(self, params: FetchParams, partitions: Sequence[FetchPartitionInfo]) -> list[LogReadResult]: ...
    def high_watermark_moved(self, partition: Partition) -> None: ...


def read_from_log(rm: Reader, params: FetchParams, partitions: Sequence[FetchPartitionInfo]) -> list[LogReadResult]:
    """Each partition read in order; the first non-empty one's first batch whole, the rest
    within what is left of ``params.max_bytes``."""
    limit = params.max_bytes
    min_one = True  # (hardMaxBytesLimit is v0-2 only; Fetch v4+ is served)
    results: list[LogReadResult] = []
    for part in partitions:
        result = _read(rm, params, part, limit, min_one)
        size = len(result.records)
        if size:
            min_one = False
        limit = max(0, limit - size)
        results.append(result)
    rm.bytes_out += sum(len(r.records) for r in results)
    return results

def _read(rm: Reader, params: FetchParams, part: FetchPartitionInfo, limit: int, min_one: bool) -> LogReadResult:
    adjusted = min(part.max_bytes, limit)
    unmade = rm.unmade_read(params, part)
    if unmade is not None:
        return unmade
    partition, error = rm.get_partition_or_error(part.topic, part.partition)
    if partition is None:
        return LogReadResult.failed(error)
    error = partition.check_local_log(part.current_leader_epoch, params.fetch_only_leader)
    follower = params.is_from_follower
    if error == ErrorCode.NONE and follower:
        remote = partition.remote.get(params.replica_id)
        error = follower_error(rm.broker_id, partition.state, remote, params, part.current_leader_epoch)
    if error != ErrorCode.NONE:
        return LogReadResult.failed(error)
    plog = partition.log
    partition.refresh_config(rm.cache.snapshot.topic_configs.get(part.topic))
    if part.last_fetched_epoch >= 0:
        diverged = diverging(plog, part.last_fetched_epoch, part.fetch_offset)
        if isinstance(diverged, ErrorCode):
            return LogReadResult.failed(diverged)
        if diverged is not None:
            hw, lso, start = plog.high_watermark, plog.last_stable_offset, plog.log_start_offset
            return LogReadResult(ErrorCode.NONE, hw, lso, start, b"", diverged)
    # the follower's log end, as Kafka records it after the read: here before, so the
    # answer carries the high watermark it moved
    if (
        follower
        and plog.log_start_offset <= part.fetch_offset <= plog.log_end_offset
        and partition.update_follower_fetch_state(params.replica_id, part.fetch_offset, params.replica_epoch)
    ):
        rm.high_watermark_moved(partition)
    if follower:
        rm.isr.maybe_expand(partition, params.replica_id)
    hw, lso, start = plog.high_watermark, plog.last_stable_offset, plog.log_start_offset
    end = params.isolation.end_offset(plog)
    max_offset = None if params.isolation is FetchIsolation.LOG_END else end
    if adjusted < 0 and start <= part.fetch_offset < end:
        # (LogSegment.read refuses a negative size: Kafka answers it as an unexpected error)
        return LogReadResult.failed(ErrorCode.UNKNOWN_SERVER_ERROR)
    try:
        data = plog.read(part.fetch_offset, max(0, adjusted), max_offset, min_one)
    except OffsetOutOfRangeError:
        return LogReadResult.failed(ErrorCode.OFFSET_OUT_OF_RANGE)
    except LogError as exc:
        return LogReadResult.failed(exc.error)
    aborted: tuple[tuple[int, int], ...] = ()
    if params.isolation is FetchIsolation.TXN_COMMITTED and data.records:
        aborted = _aborted(plog, part.fetch_offset, data.records)
    return LogReadResult(ErrorCode.NONE, hw, lso, start, data.records, None, aborted)


def _aborted(plog: PartitionLog, fetch_offset: int, records: bytes | memoryview) -> tuple[tuple[int, int], ...]:
    """``addAbortedTransactions``: the aborted transactions overlapping what was read, up to
    the offset after its last batch (a header walk, only when the log has aborted any)."""
    if not plog.producer_state.aborted:
        return ()
    last = None
    for h in headers(records):
        last = h
    if last is None:
        return ()
    found = plog.producer_state.aborted_transactions(fetch_offset, last_offset(last) + 1)
    return tuple((t.producer_id, t.first_offset) for t in found)

def fetch_messages(rm: Reader, params: FetchParams, partitions: Sequence[FetchPartitionInfo], callback: FetchCallback
) -> None:
    """``ReplicaManager.fetchMessages``: ``callback`` gets the reads now when the fetch
    does not wait, has nothing to wait for, reads enough, or met an error; else later,
    from the purgatory."""
    results = read_from_log(rm, params, partitions)
    readable = sum(len(r.records) for r in results)
    if (
        params.max_wait_ms <= 0
        or not partitions
        or readable >= params.min_bytes
        or any(r.error != ErrorCode.NONE or r.diverging_epoch is not None for r in results)
    ):
        callback(results)
        return
    rm.bytes_out -= readable  # (read again when it completes)
    delayed = DelayedFetch(params, partitions, rm, callback)
    rm.delayed_fetch.try_complete_else_watch(delayed, [(p.topic, p.partition) for p in partitions])
