"""Compaction of the logs whose cleanup.policy has ``compact`` (Kafka's ``LogCleaner`` and
``LogCleanerManager``): which log is due, what part of it may be cleaned, and the swap of its
cleaned segments. The algorithm itself is :mod:`kmeta.log.cleaner.cleaner`.

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
  not move. It is planned, computed and installed in three steps
  (:mod:`kmeta.log.cleaner.clean_task`), so the broker computes off its event loop.

Pure data like the rest of kmeta.log: the broker schedules it (log.cleaner.backoff.ms).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from kmeta.log import checkpoints
from kmeta.log.cleaner.clean_task import CleanTask
from kmeta.log.cleaner.cleaner import MAX_KEYS
from kmeta.log.partition_log import PartitionLog
from kmeta.log.record.record_set import DELETE_HORIZON_MASK
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


def _earliest_horizon(plog: PartitionLog) -> int | None:
    """The earliest delete horizon an earlier cleaning (another process's, before a
    restart) wrote into a batch of the log: when it passes, the log is due again."""
    horizons = [
        h.base_timestamp
        for segment in plog.local.segments[:-1]
        for _, h in segment.batches_from(0)
        if h.attributes & DELETE_HORIZON_MASK
    ]
    return min(horizons) if horizons else None


class LogCleaner:
    def __init__(self, max_keys: int = MAX_KEYS) -> None:
        self.max_keys = max_keys
        self._states: dict[tuple[str, int], CleanerState] = {}
        self.cleanings = 0
        #: logs a cleaning failed on (records that do not parse): left alone, as Kafka marks
        #: a partition uncleanable, until the log is deleted or the broker restarts
        self.uncleanable: set[tuple[str, int]] = set()

    def state(self, plog: PartitionLog) -> CleanerState:
        key = (plog.topic, plog.partition)
        state = self._states.get(key)
        if state is None or state.log is not plog:
            saved = None
            if plog.dir is not None:
                saved = checkpoints.read_offset(plog.dir, CLEANER_CHECKPOINT_FILE)
            state = self._states[key] = CleanerState(plog, saved or 0, _earliest_horizon(plog))
        if not plog.log_start_offset <= state.first_dirty_offset <= plog.log_end_offset:
            state.first_dirty_offset = plog.log_start_offset  # (truncated, or records deleted)
        return state

    def forget(self, topic: str, partition: int) -> None:
        self._states.pop((topic, partition), None)
        self.uncleanable.discard((topic, partition))

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
        if not plog.config.compact or (plog.topic, plog.partition) in self.uncleanable:
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

    def plan(self, plog: PartitionLog, now_ms: int) -> CleanTask:
        """A cleaning of ``plog`` to compute (:mod:`kmeta.log.cleaner.clean_task`)."""
        start = self.state(plog).first_dirty_offset
        uncleanable = self.first_uncleanable_offset(plog, now_ms)
        return CleanTask.plan(plog, now_ms, start, uncleanable, self.max_keys)

    def plan_filthiest(self, logs: Iterable[PartitionLog], now_ms: int) -> CleanTask | None:
        """A cleaning of the most due log, if any (Kafka's ``grabFilthiestCompactedLog``)."""
        best: tuple[float, PartitionLog] | None = None
        for plog in logs:
            score = self.due(plog, now_ms)
            if score is not None and (best is None or score > best[0]):
                best = (score, plog)
        return None if best is None else self.plan(best[1], now_ms)

    def finish(self, task: CleanTask) -> CleanResult | None:
        """Install a computed cleaning (None when its log changed meanwhile); raises LogError
        (a segment that would not swap: the log keeps the groups not swapped yet)."""
        plog = task.log
        before, count_before = plog.size_in_bytes, len(plog.local.segments)
        if task.install() is None:
            return None
        state = self.state(plog)
        state.first_dirty_offset = max(task.end_offset, plog.log_start_offset)
        state.earliest_horizon = task.earliest_horizon
        if plog.dir is not None and os.path.isdir(plog.dir):
            checkpoints.write_offset(
                plog.dir, CLEANER_CHECKPOINT_FILE, plog.topic, plog.partition, state.first_dirty_offset
            )
        self.cleanings += 1
        return CleanResult(
            str(plog), task.start, task.end_offset, before, plog.size_in_bytes, count_before,
            len(plog.local.segments),
        )  # fmt: skip

    def clean(self, plog: PartitionLog, now_ms: int) -> CleanResult:
        """One cleaning of ``plog``, all three steps here (Kafka's ``Cleaner.doClean``)."""
        result = self.finish(self.plan(plog, now_ms).compute())
        assert result is not None  # (nothing ran between the steps)
        return result
