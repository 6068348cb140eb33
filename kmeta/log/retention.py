"""Which of a log's oldest segments may go (the predicates of Kafka's ``deleteOldSegments``).

Each rule looks at a segment and the one after it (None for the last); deletion walks from
the oldest segment while the rule holds, and never past the high watermark
(:meth:`~kmeta.log.local_log.LocalLog.deletable`)."""

from __future__ import annotations

from collections.abc import Callable

from kmeta.log.config import LogConfig
from kmeta.log.segment import LogSegment

Rule = Callable[[LogSegment, LogSegment | None], bool]


def below_log_start(log_start_offset: int) -> Rule:
    """Segments wholly below the log start (DeleteRecords moved it past them)."""
    return lambda segment, following: (
        following is not None and following.base_offset <= log_start_offset
    )


def any_segment(segment: LogSegment, following: LogSegment | None) -> bool:
    """The memory cap's rule: the oldest goes, whatever its age."""
    return True


def over_retention_bytes(config: LogConfig, size_in_bytes: int, now_ms: int) -> Rule | None:
    """retention.bytes: the oldest segments while what stays is still at least the limit."""
    if config.retention_bytes < 0 or size_in_bytes < config.retention_bytes:
        return None
    excess = [size_in_bytes - config.retention_bytes]

    def rule(segment: LogSegment, following: LogSegment | None) -> bool:
        if excess[0] - segment.size < 0:
            return False
        excess[0] -= segment.size
        return True

    return rule


def over_retention_ms(config: LogConfig, size_in_bytes: int, now_ms: int) -> Rule | None:
    """retention.ms: segments whose newest timestamp (else last append) is older than it."""
    if config.retention_ms < 0:
        return None
    return lambda segment, following: now_ms - segment.largest_timestamp > config.retention_ms
