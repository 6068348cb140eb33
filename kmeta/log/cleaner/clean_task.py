"""One cleaning of one log in three steps, so the work in the middle can leave the broker's
event loop (Kafka runs its cleaner on threads of its own):

* :meth:`CleanTask.plan` (with the log's owner, like any log call): what the log holds now, as
  snapshots of its segments (a closed memory segment's bytes are a view of a buffer never
  changed in place again; a file is named, and read by the work on a descriptor of its own).
* :meth:`CleanTask.compute` (anywhere: it touches only the snapshots): the producer scan, the
  offset map and the cleaned bytes of each group of segments (:mod:`kmeta.log.cleaner.cleaner`).
* :meth:`CleanTask.install` (with the owner again): each group swapped in, unless the log
  changed under the work (a segment gone, truncated or grown): then nothing is, and the next
  turn plans afresh. Appends meanwhile only go to the active segment, never cleaned.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from kmeta.log.cleaner.cleaner import (
    Batch,
    Cleaned,
    GroupCleaner,
    TxnTracker,
    build_offset_map,
    scan_producers,
)
from kmeta.log.errors import LogStorageError
from kmeta.log.partition_log import PartitionLog
from kmeta.log.record.batch import header_at, last_offset
from kmeta.log.segment import LogSegment
from kmeta.log.stores import MemoryStore
from kmeta.protocol.records.record_batch import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD


class CleaningCancelled(Exception):
    """The owner gave up on the task (the broker is stopping)."""


@dataclass
class SegmentSnapshot:
    segment: LogSegment
    base_offset: int
    next_offset: int
    size: int
    data: memoryview | None  # the bytes (memory), or None until read from ``path``
    path: str | None

    def bytes(self) -> memoryview:
        """The segment's bytes as planned: a file is read afresh at each pass and not kept
        (one segment at a time in memory, not the whole log)."""
        if self.data is not None:
            return self.data
        if self.size == 0:  # (an empty segment may have no file yet)
            return memoryview(b"")
        try:
            fd = os.open(str(self.path), os.O_RDONLY | os.O_CLOEXEC)
            try:
                return memoryview(os.pread(fd, self.size, 0))
            finally:
                os.close(fd)
        except OSError as exc:
            raise LogStorageError(f"Error while reading {self.path} to clean it: {exc}") from exc

    def batches(self, start: int = 0, end: int | None = None) -> Iterator[Batch]:
        view = self.bytes()
        pos = 0
        while pos + RECORD_BATCH_OVERHEAD <= len(view):
            h = header_at(view, pos)
            size = h.batch_length + LOG_OVERHEAD
            if pos + size > len(view):
                return
            if end is not None and h.base_offset >= end:
                return
            if last_offset(h) >= start:
                yield view[pos : pos + size], h
            pos += size


@dataclass
class CleanTask:
    log: PartitionLog
    now_ms: int
    start: int  # the first dirty offset
    uncleanable: int  # the first offset not to clean
    max_keys: int
    segments: list[SegmentSnapshot]
    #: filled by compute: each group (indexes into ``segments``) and its cleaned bytes
    outputs: list[tuple[list[int], Cleaned]] = field(default_factory=list)
    end_offset: int = -1
    cancelled: bool = False

    @classmethod
    def plan(cls, plog: PartitionLog, now_ms: int, start: int, uncleanable: int, max_keys: int) -> CleanTask:
        snaps = []
        for segment in plog.local.segments:
            store = segment.store
            data = None
            path = None
            if isinstance(store, MemoryStore):
                data = memoryview(store.read(0, segment.size)) if segment.size else memoryview(b"")
            else:
                path = store.path
            snaps.append(
                SegmentSnapshot(segment, segment.base_offset, segment.next_offset, segment.size, data, path)
            )
        return cls(plog, now_ms, start, uncleanable, max_keys, snaps)

    def _all(self, snaps: Iterable[SegmentSnapshot], start: int = 0, end: int | None = None) -> Iterator[Batch]:
        for snap in snaps:
            for batch in snap.batches(start, end):
                if self.cancelled:
                    raise CleaningCancelled
                yield batch

    def compute(self) -> CleanTask:
        """The cleaned bytes of every group (touches the snapshots only)."""
        config = self.log.config
        scan = scan_producers(self._all(self.segments))
        dirty = [s for s in self.segments if s.base_offset < self.uncleanable and s.size]
        offset_map = build_offset_map(
            self._all(dirty, self.start, self.uncleanable), self.start, scan.aborted, self.max_keys
        )
        self.end_offset = max(offset_map.end_offset, self.start)
        cleaner = GroupCleaner(
            offset_map, TxnTracker(scan.aborted), scan.active(self.now_ms), self.now_ms,
            config.delete_retention_ms,
        )  # fmt: skip
        for group in self._groups(config.segment_bytes):
            self.outputs.append((group, cleaner.clean(self._all(self.segments[i] for i in group))))
        return self

    def _groups(self, limit: int) -> list[list[int]]:
        """The closed segments holding offsets below the end, in runs whose bytes fit
        segment.bytes (Kafka's ``groupSegmentsBySize``)."""
        account = self.log.local.account
        if self.log.dir is None and account is not None:
            limit = min(limit, account.max_segment_bytes)
        groups: list[list[int]] = []
        size = 0
        for i, snap in enumerate(self.segments[:-1]):
            if snap.base_offset >= self.end_offset:
                break
            first = self.segments[groups[-1][0]].base_offset if groups else 0
            if groups and size + snap.size <= limit and snap.next_offset - first <= (1 << 31) - 1:
                groups[-1].append(i)
                size += snap.size
            else:
                groups.append([i])
                size = snap.size
        return groups

    def unchanged(self) -> bool:
        """Every segment a group rewrites is still in the log, closed, as it was read."""
        local = self.log.local
        live = {id(s): n for n, s in enumerate(local.segments)}
        for group, _ in self.outputs:
            for k, i in enumerate(group):
                snap = self.segments[i]
                n = live.get(id(snap.segment))
                if n is None or n == len(local.segments) - 1:
                    return False
                if (snap.segment.size, snap.segment.next_offset) != (snap.size, snap.next_offset):
                    return False
                if k and live.get(id(self.segments[group[k - 1]].segment)) != n - 1:
                    return False
        return True

    def install(self) -> int | None:
        """Swap the groups in; the bytes freed, or None when the log changed meanwhile."""
        if not self.unchanged():
            return None
        freed = 0
        for group, cleaned in self.outputs:
            old = [self.segments[i].segment for i in group]
            freed += self.log.local.replace(old, cleaned.data, cleaned.batches, self.now_ms)
        return freed

    @property
    def earliest_horizon(self) -> int | None:
        horizons = [c.earliest_horizon for _, c in self.outputs if c.earliest_horizon is not None]
        return min(horizons) if horizons else None
