"""What an append answers (Kafka's ``LogAppendInfo``): the offsets and timestamps of the batches
stored, or of the original of a retried one. Apart from :mod:`kmeta.log.partition_log` so that
its follower side (:mod:`kmeta.log.replica_log`) answers the same without importing it."""

from __future__ import annotations

from typing import NamedTuple

from kmeta.log.producer.producer_entry import BatchMetadata
from kmeta.log.record.batch import last_offset
from kmeta.protocol.records.record_batch import BatchHeader


class LogAppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time_ms: int  # -1 unless LogAppendTime
    log_start_offset: int
    record_count: int
    size_in_bytes: int

    @classmethod
    def duplicate(cls, meta: BatchMetadata, log_start: int) -> LogAppendInfo:
        """A retried batch's answer (``UnifiedLog.appendAsLeader`` on a duplicate): the
        original's offsets, its timestamp as the log append time; nothing appended."""
        return cls(meta.first_offset, meta.last_offset, meta.timestamp, meta.timestamp, log_start, 0, 0)

    @classmethod
    def of(
        cls, batches: list[BatchHeader], log_start: int, size: int, append_time: int = -1
    ) -> LogAppendInfo:
        first, last = batches[0], batches[-1]
        max_ts = max(h.max_timestamp for h in batches)
        count = sum(h.last_offset_delta + 1 for h in batches)
        return cls(
            first.base_offset, last_offset(last), max_ts, append_time, log_start, count, size
        )
