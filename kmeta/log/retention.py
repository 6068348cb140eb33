"""What goes from a log's start (Kafka's ``deleteOldSegments`` and ``deleteRecordsBefore``):
:class:`LogRetention`, a part of :class:`~kmeta.log.partition_log.PartitionLog` of its own,
and the rules saying which of the oldest segments may go.

Each rule looks at a segment and the one after it (None for the last); deletion walks from
the oldest segment while the rule holds, and never past the high watermark
(:meth:`~kmeta.log.local_log.LocalLog.deletable`). The log start moves up to the first
segment left, and the producer snapshots of the segments that went go with them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from kmeta.log.config import LogConfig
from kmeta.log.errors import OffsetOutOfRangeError
from kmeta.log.segment import LogSegment

if TYPE_CHECKING:
    from kmeta.log.local_log import LocalLog
    from kmeta.log.producer.log_producers import LogProducers

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


class _Log(Protocol):
    """What of PartitionLog retention uses."""

    local: LocalLog
    config: LogConfig
    _producers: LogProducers
    _log_start_offset: int
    _high_watermark: int

    @property
    def log_end_offset(self) -> int: ...

    @property
    def size_in_bytes(self) -> int: ...

    def _move_log_start(self, offset: int) -> None: ...

    def _delete_old(self, rule: Rule, limit: int | None = None) -> int: ...


class LogRetention:
    """A mixin: its methods use the log's segments, config, offsets and producers as
    :class:`_Log` says."""

    __slots__ = ()

    def delete_records_before(self: _Log, offset: int) -> int:
        """DeleteRecords: the log start moves up to ``offset`` (at most the high watermark,
        else OffsetOutOfRangeError), whole segments below it go; returns the log start."""
        if offset > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {offset} of partition {self} "
                f"since it is larger than the high watermark {self._high_watermark}"
            )
        if offset > self._log_start_offset:
            self._move_log_start(offset)
            self._delete_old(below_log_start(self._log_start_offset))
        return self._log_start_offset

    def enforce_retention(self: _Log, now_ms: int) -> int:
        """Kafka's ``deleteOldSegments``: segments wholly below the log start, then, when
        cleanup.policy has ``delete``, the oldest while the log exceeds retention.bytes (never
        below it), then those whose newest timestamp is older than retention.ms; never past
        the high watermark. A compact-only log keeps its records whatever their age or size:
        the cleaner keeps it small. Bytes freed."""
        freed = self._delete_old(below_log_start(self._log_start_offset))
        if not self.config.delete:
            return freed
        for rules in (over_retention_bytes, over_retention_ms):
            rule = rules(self.config, self.size_in_bytes, now_ms)
            if rule is not None:
                freed += self._delete_old(rule)
        return freed

    def oldest_deletable_segment(self: _Log) -> LogSegment | None:
        """The segment a memory cap would drop next (the oldest, if retention could); never
        one of a log whose cleanup.policy lacks ``delete``."""
        if not self.config.delete:
            return None
        deletable = self.local.deletable(any_segment, self._high_watermark)
        return self.local.segments[0] if deletable else None

    def delete_oldest_segment(self: _Log) -> int:
        """Drop the oldest segment as retention would (the log start moves); bytes freed."""
        return self._delete_old(any_segment, limit=1)

    def _delete_old(self: _Log, rule: Rule, limit: int | None = None) -> int:
        count = min(self.local.deletable(rule, self._high_watermark), limit or 1 << 62)
        if count == 0:
            return 0
        if count == len(self.local.segments):
            self.local.roll()  # a log always has an active segment
            self._producers.take_snapshot(self.log_end_offset)
        new_start = self.local.segments[count].base_offset
        if new_start > self._log_start_offset:
            self._move_log_start(new_start)
        freed = self.local.delete_oldest(count)
        self._producers.segments_deleted(new_start)
        return freed
