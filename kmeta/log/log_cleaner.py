"""Compaction of the logs whose cleanup.policy has ``compact`` (Kafka's ``LogCleaner`` and
``LogCleanerManager``): which log is due, what part of it may be cleaned, and the swap of its
cleaned segments. The algorithm itself is :mod:`kmeta.log.cleaner`.

* What may be cleaned: from the log start to the first uncleanable offset, the least of the
  active segment's base (the active segment is never cleaned; segment.ms rolls it), the last
  stable offset (never past the high watermark or an open transaction) and, with
  min.compaction.lag.ms, the first segment holding a record younger than that.
* The first dirty offset (Kafka's cleaner-offset-checkpoint) is where the last cleaning
  stopped; below it the log is clean. A log is due when its dirty bytes are at least
  min.cleanable.dirty.ratio of its cleanable bytes, when a dirty record is older than
  max.compaction.lag.ms, or when a delete horizon a cleaning wrote has passed (its tombstones
  and markers may go now). :meth:`LogCleaner.clean_filthiest` cleans the most due log.
* A cleaning rewrites the segments below the offset map's end in groups whose bytes fit
  segment.bytes (consecutive small segments merge, so a compacted log's segment count stays
  small), each group swapped in as one segment at its first base offset
  (:meth:`~kmeta.log.local_log.LocalLog.replace`). Offsets are kept; the log start and end do
  not move.

Pure data like the rest of kmeta.log: the broker schedules it (log.cleaner.backoff.ms).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kmeta.log import checkpoints
from kmeta.log.batch import last_offset
from kmeta.log.cleaner import (
    MAX_KEYS,
    Batch,
    GroupCleaner,
    TxnTracker,
    build_offset_map,
    scan_producers,
)
from kmeta.log.partition_log import PartitionLog
from kmeta.log.segment import LogSegment

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"


@dataclass
class CleanerState:
    """What the cleaner remembers of one log."""

    log: PartitionLog
    first_dirty_offset: int
    #: the earliest delete horizon a cleaning wrote into a batch it kept (None: none)
    earliest_horizon: int | None = None


@dataclass(frozen=True, slots=True)
class CleanResult:
    log: str
    first_dirty_offset: int  # where this cleaning started mapping
    end_offset: int  # the new first dirty offset
    bytes_before: int
    bytes_after: int
    segments_before: int
    segments_after: int


def _segments_between(plog: PartitionLog, start: int, end: int) -> list[LogSegment]:
    """The segments holding any offset in [start, end) (Kafka's ``logSegments(from, to)``)."""
    segments = plog.local.segments
    out = []
    for i, segment in enumerate(segments):
        upper = segments[i + 1].base_offset if i + 1 < len(segments) else plog.log_end_offset
        if segment.base_offset < end and upper > start:
            out.append(segment)
    return out


def _batches(segment: LogSegment, start: int = 0, end: int | None = None) -> Iterator[Batch]:
    """``(bytes, header)`` of each batch of the segment (one read of the whole segment)."""
    data = memoryview(segment.store.read(0, segment.size)) if segment.size else memoryview(b"")
    for pos, h in segment.batches_from(0):
        if last_offset(h) < start:
            continue
        if end is not None and h.base_offset >= end:
            return
        yield data[pos : pos + h.batch_length + 12], h


def _all_batches(segments: Iterable[LogSegment], start: int = 0, end: int | None = None) -> Iterator[Batch]:
    for segment in segments:
        yield from _batches(segment, start, end)


class LogCleaner:
    def __init__(self, max_keys: int = MAX_KEYS) -> None:
        self.max_keys = max_keys
        self._states: dict[tuple[str, int], CleanerState] = {}
        self.cleanings = 0

    def state(self, plog: PartitionLog) -> CleanerState:
        key = (plog.topic, plog.partition)
        state = self._states.get(key)
        if state is None or state.log is not plog:
            saved = None
            if plog.dir is not None:
                saved = checkpoints.read_offset(plog.dir, CLEANER_CHECKPOINT_FILE)
            state = self._states[key] = CleanerState(plog, saved or 0)
        if not plog.log_start_offset <= state.first_dirty_offset <= plog.log_end_offset:
            state.first_dirty_offset = plog.log_start_offset  # (truncated, or records deleted)
        return state

    def forget(self, topic: str, partition: int) -> None:
        self._states.pop((topic, partition), None)

    @staticmethod
    def first_uncleanable_offset(plog: PartitionLog, now_ms: int) -> int:
        bound = min(plog.local.active.base_offset, plog.last_stable_offset)
        lag = plog.config.min_compaction_lag_ms
        if lag > 0:
            for segment in plog.local.segments:
                if segment.base_offset >= bound:
                    break
                if segment.largest_timestamp > now_ms - lag:
                    return segment.base_offset
        return bound

    def dirty_ratio(self, plog: PartitionLog, now_ms: int) -> tuple[float, int]:
        """(dirty bytes / cleanable bytes, dirty bytes) over whole segments, as Kafka."""
        first_dirty = self.state(plog).first_dirty_offset
        end = max(first_dirty, self.first_uncleanable_offset(plog, now_ms))
        clean = sum(s.size for s in _segments_between(plog, plog.log_start_offset, first_dirty))
        dirty = sum(s.size for s in _segments_between(plog, first_dirty, end))
        total = clean + dirty
        return (dirty / total if total else 0.0), dirty

    def due(self, plog: PartitionLog, now_ms: int) -> float | None:
        """How due the log is (its dirty ratio; past 1.0 when a lag or horizon forces it), or
        None when it is not."""
        if not plog.config.compact:
            return None
        ratio, dirty = self.dirty_ratio(plog, now_ms)
        state = self.state(plog)
        if state.earliest_horizon is not None and state.earliest_horizon <= now_ms:
            return 2.0 + ratio
        if dirty and plog.config.max_compaction_lag_ms < (1 << 62):
            end = self.first_uncleanable_offset(plog, now_ms)
            for segment in _segments_between(plog, state.first_dirty_offset, end):
                first = segment.rolling_timestamp
                if first >= 0 and now_ms - first > plog.config.max_compaction_lag_ms:
                    return 1.0 + ratio
        if dirty and ratio >= plog.config.min_cleanable_dirty_ratio:
            return ratio
        return None

    def clean_filthiest(self, logs: Iterable[PartitionLog], now_ms: int) -> CleanResult | None:
        """Clean the most due log, if any (Kafka's ``grabFilthiestCompactedLog``)."""
        best: tuple[float, PartitionLog] | None = None
        for plog in logs:
            score = self.due(plog, now_ms)
            if score is not None and (best is None or score > best[0]):
                best = (score, plog)
        return None if best is None else self.clean(best[1], now_ms)

    def clean(self, plog: PartitionLog, now_ms: int) -> CleanResult:
        """One cleaning of ``plog`` (Kafka's ``Cleaner.doClean``); raises LogError (a segment
        that would not swap: the log keeps what it had, nothing half done is served)."""
        state = self.state(plog)
        config = plog.config
        segments = plog.local.segments
        before, count_before = plog.size_in_bytes, len(segments)
        start = state.first_dirty_offset
        uncleanable = self.first_uncleanable_offset(plog, now_ms)
        scan = scan_producers(_all_batches(list(segments)))
        offset_map = build_offset_map(
            _all_batches(_segments_between(plog, start, uncleanable), start, uncleanable),
            start, scan.aborted, self.max_keys,
        )  # fmt: skip
        end = max(offset_map.end_offset, start)
        cleaner = GroupCleaner(
            offset_map, TxnTracker(scan.aborted), scan.active(now_ms), now_ms,
            config.delete_retention_ms,
        )  # fmt: skip
        earliest: int | None = None
        for group in self._groups(plog, end):
            cleaned = cleaner.clean(_all_batches(group))
            plog.local.replace(group, cleaned.data, cleaned.batches, now_ms)
            if cleaned.earliest_horizon is not None:
                earliest = min(earliest or cleaned.earliest_horizon, cleaned.earliest_horizon)
        state.first_dirty_offset = end
        state.earliest_horizon = earliest
        if plog.dir is not None and os.path.isdir(plog.dir):
            checkpoints.write_offset(
                plog.dir, CLEANER_CHECKPOINT_FILE, plog.topic, plog.partition, end
            )
        self.cleanings += 1
        return CleanResult(
            str(plog), start, end, before, plog.size_in_bytes, count_before, len(plog.local.segments)
        )

    @staticmethod
    def _groups(plog: PartitionLog, end: int) -> list[list[LogSegment]]:
        """The closed segments holding offsets below ``end``, in runs whose bytes fit
        segment.bytes (Kafka's ``groupSegmentsBySize``)."""
        local = plog.local
        limit = plog.config.segment_bytes
        if local.dir is None and local.account is not None:
            limit = min(limit, local.account.max_segment_bytes)
        groups: list[list[LogSegment]] = []
        size = 0
        for segment in local.segments[:-1]:
            if segment.base_offset >= end:
                break
            if groups and size + segment.size <= limit and (
                segment.next_offset - groups[-1][0].base_offset <= (1 << 31) - 1
            ):
                groups[-1].append(segment)
                size += segment.size
            else:
                groups.append([segment])
                size = segment.size
        return groups
