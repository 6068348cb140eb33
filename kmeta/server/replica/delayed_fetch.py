"""What a Fetch asks of the replica manager, what a read gives back, and DelayedFetch.

Kafka's ``FetchParams``, ``FetchRequest.PartitionData``, ``LogReadResult`` and
``DelayedFetch``: a fetch that cannot be answered at once (less than ``min_bytes`` readable,
``max_wait_ms`` > 0, no error) waits in the replica manager's fetch purgatory, watched under
each of its partitions; an append or a high-watermark move on one of them, a leader change or
a stopped replica checks it again, and the timer answers it at ``max_wait_ms`` with whatever
is there then.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from kmeta.log.errors import LogError
from kmeta.log.partition_log import PartitionLog
from kmeta.log.replica_log import EpochEndOffset
from kmeta.protocol.errors import ErrorCode
from kmeta.server.replica.partition import Partition
from kmeta.server.replica.purgatory import DelayedOperation


class FetchIsolation(enum.Enum):
    """How far a fetch may read (Kafka's ``FetchIsolation.of``)."""

    LOG_END = 0  # a follower: everything the leader has
    HIGH_WATERMARK = 1  # a consumer, read_uncommitted
    TXN_COMMITTED = 2  # a consumer, read_committed: the last stable offset

    @classmethod
    def of(cls, replica_id: int, isolation_level: int) -> FetchIsolation:
        if replica_id >= 0:
            return cls.LOG_END
        return cls.TXN_COMMITTED if isolation_level == 1 else cls.HIGH_WATERMARK

    def end_offset(self, log: PartitionLog) -> int:
        """The offset a fetch with this isolation reads up to (excluded)."""
        if self is FetchIsolation.LOG_END:
            return log.log_end_offset
        if self is FetchIsolation.HIGH_WATERMARK:
            return log.high_watermark
        return log.last_stable_offset


class FetchParams(NamedTuple):
    replica_id: int  # >= 0: a follower broker; < 0: a consumer
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation: FetchIsolation
    #: the fetching broker's epoch (Fetch v15+ ReplicaState; -1: not given)
    replica_epoch: int = -1

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def fetch_only_leader(self) -> bool:
        """Consumers read from the leader (no rack-aware follower reads: a v11+ consumer may
        read from a follower in Kafka 3.x, KIP-392, which needs a replica selector)."""
        return True


class FetchPartitionInfo(NamedTuple):
    """One partition of a Fetch request, its topic resolved to a name."""

    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1


class LogReadResult(NamedTuple):
    """One partition's read; offsets -1 when unknown (an error before the log was read)."""

    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes | memoryview = b""
    diverging_epoch: EpochEndOffset | None = None
    #: read_committed: the aborted transactions the records overlap (producer id, first offset)
    aborted_transactions: tuple[tuple[int, int], ...] = ()

    @classmethod
    def failed(cls, error: ErrorCode) -> LogReadResult:
        return cls(error)


#: what a completed fetch is answered with
FetchCallback = Callable[[list[LogReadResult]], None]


def diverging(log: PartitionLog, last_fetched_epoch: int, fetch_offset: int) -> EpochEndOffset | ErrorCode | None:
    """Kafka's ``Partition.readRecords`` epoch check (Fetch v12+ ``LastFetchedEpoch``): the
    leader's end of that epoch when the fetcher's log diverges from ours (it must truncate),
    OFFSET_OUT_OF_RANGE when the epoch is unknown here or the offset is below the log start,
    None when the fetch goes on."""
    end = log.end_offset_for_epoch(last_fetched_epoch)
    if end.end_offset == -1 or end.leader_epoch == -1 or fetch_offset < log.log_start_offset:
        return ErrorCode.OFFSET_OUT_OF_RANGE
    if end.leader_epoch < last_fetched_epoch or end.end_offset < fetch_offset:
        return end
    return None


class FetchReader(Protocol):
    """What a delayed fetch checks and reads through: the replica manager's reads."""

    def get_partition_or_error(self, topic: str, index: int) -> tuple[Partition | None, ErrorCode]: ...
    def read_from_log(self, params: FetchParams, partitions: Sequence[FetchPartitionInfo]) -> list[LogReadResult]: ...
    def unmade_read(self, params: FetchParams, part: FetchPartitionInfo) -> LogReadResult | None: ...


class DelayedFetch(DelayedOperation):
    __slots__ = ("callback", "params", "partitions", "replica_manager")

    def __init__(
        self, params: FetchParams, partitions: Sequence[FetchPartitionInfo],
        replica_manager: FetchReader, callback: FetchCallback,
    ) -> None:  # fmt: skip
        super().__init__(params.max_wait_ms / 1000.0)
        self.params = params
        self.partitions = partitions
        self.replica_manager = replica_manager
        self.callback = callback

    def try_complete(self) -> bool:
        """Kafka's DelayedFetch cases: a partition that errs now (no longer led, unknown,
        fenced), a fetch offset past the end it may read (the log was truncated; for
        read_committed past the high watermark, not the last stable offset) or below the log
        start, a diverged epoch: complete at once; else complete when at least
        ``min_bytes`` are readable (each partition counted up to its max bytes)."""
        accumulated = 0
        params = self.params
        for part in self.partitions:
            unmade = self.replica_manager.unmade_read(params, part)
            if unmade is not None and unmade.error == ErrorCode.NONE:
                continue  # (a follower waiting on a partition whose log is not made yet)
            partition, _ = self.replica_manager.get_partition_or_error(part.topic, part.partition)
            if partition is None or partition.check_local_log(
                part.current_leader_epoch, params.fetch_only_leader
            ) != ErrorCode.NONE:  # fmt: skip
                return self.force_complete()
            log = partition.log
            end = params.isolation.end_offset(log)
            # (read_committed past the last stable offset but not the high watermark waits
            # for the transaction to end, as Kafka's: only a truncated log answers at once)
            past = log.high_watermark if params.isolation is FetchIsolation.TXN_COMMITTED else end
            if part.fetch_offset > past or part.fetch_offset < log.log_start_offset:
                return self.force_complete()
            if part.last_fetched_epoch >= 0 and (
                diverging(log, part.last_fetched_epoch, part.fetch_offset) is not None
            ):
                return self.force_complete()
            if part.fetch_offset < end and accumulated < params.min_bytes:
                wanted = max(0, min(part.max_bytes, params.min_bytes - accumulated))
                try:
                    data = log.read(part.fetch_offset, wanted, end, True)
                except LogError:  # (moved under us: the answer will say how)
                    return self.force_complete()
                accumulated += min(len(data.records), max(0, part.max_bytes))
        if accumulated >= params.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.callback(self.replica_manager.read_from_log(self.params, self.partitions))
