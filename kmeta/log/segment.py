"""One segment of a partition log (Kafka's ``LogSegment``): batches from ``base_offset`` on,
stored back to back, with a sparse index so a read is a bisect and a short header walk.

The index (Kafka's ``OffsetIndex`` and ``TimeIndex`` folded into three arrays) holds an entry
for the first batch and then one for the first batch after every ``index_interval_bytes``:
its base offset, its position, and the largest batch maxTimestamp up to the next entry *so
far* (a running maximum, so the first entry reaching a timestamp is found by bisect too).
Between two entries the batch headers are walked; nothing below the header is read.
"""

from __future__ import annotations

import itertools
import time
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence

from kmeta.log.record.batch import NO_TIMESTAMP, Buffer, last_offset
from kmeta.log.record.records import first_at_or_after
from kmeta.log.stores import FileStore, MemoryStore
from kmeta.protocol.records.record_batch import LOG_OVERHEAD, BatchHeader

Store = MemoryStore | FileStore
#: orders appends across every log of the process: a memory cap drops the segment whose last
#: append is oldest
_APPENDS = itertools.count()


class LogSegment:
    __slots__ = (
        "_bytes_since_entry",
        "_index_interval",
        "_max_ts",
        "_offsets",
        "_positions",
        "append_seq",
        "base_offset",
        "created_ms",
        "last_modified_ms",
        "next_offset",
        "rolling_timestamp",
        "size",
        "store",
    )

    def __init__(self, base_offset: int, store: Store, index_interval_bytes: int) -> None:
        self.base_offset = base_offset
        self.store = store
        self.size = 0
        self.next_offset = base_offset  # one past the last batch's last offset
        self.last_modified_ms = 0
        self.append_seq = next(_APPENDS)
        self.created_ms = int(time.time() * 1000)
        #: what segment.ms counts from (Kafka's ``rollingBasedTimestamp``): the first batch's
        #: maxTimestamp, NO_TIMESTAMP until there is one
        self.rolling_timestamp = NO_TIMESTAMP
        self._index_interval = index_interval_bytes
        self._offsets = array("q")
        self._positions = array("q")
        self._max_ts = array("q")
        self._bytes_since_entry = 0

    @property
    def max_timestamp(self) -> int:
        return self._max_ts[-1] if self._max_ts else NO_TIMESTAMP

    def time_waited_for_roll(self, now_ms: int, max_timestamp: int) -> int:
        """How long this segment has been open, for segment.ms (Kafka's ``timeWaitedForRoll``):
        from its first batch's timestamp to the new batch's, else since it was made."""
        if self.rolling_timestamp >= 0:
            return max_timestamp - self.rolling_timestamp
        return now_ms - self.created_ms

    @property
    def largest_timestamp(self) -> int:
        """What retention.ms compares (Kafka's ``largestTimestamp``): the largest batch
        timestamp, or the last append's time when no batch has one."""
        ts = self.max_timestamp
        return ts if ts >= 0 else self.last_modified_ms

    def append(
        self,
        data: Buffer,
        prefix: bytes | None,
        batches: Sequence[tuple[int, BatchHeader]],
        now_ms: int,
    ) -> None:
        """Store ``data`` (whole batches, ``prefix`` written over its first bytes) after the
        last batch; ``batches`` are their positions relative to ``data`` and headers."""
        pos = self.size
        self.store.write(pos, data, prefix)  # raises LogStorageError, store as it was
        for rel, h in batches:
            self.index_batch(pos + rel, h)
        self.size = pos + len(data)
        self.next_offset = last_offset(batches[-1][1]) + 1
        self.last_modified_ms = now_ms
        self.append_seq = next(_APPENDS)

    def index_batch(self, pos: int, h: BatchHeader) -> None:
        """Account for one stored batch (append, and recovery walking a file)."""
        if not self._offsets:
            self.rolling_timestamp = h.max_timestamp
        if not self._offsets or self._bytes_since_entry > self._index_interval:
            prev = self._max_ts[-1] if self._max_ts else NO_TIMESTAMP
            self._offsets.append(h.base_offset)
            self._positions.append(pos)
            self._max_ts.append(max(prev, h.max_timestamp))
            self._bytes_since_entry = 0
        elif h.max_timestamp > self._max_ts[-1]:
            self._max_ts[-1] = h.max_timestamp
        self._bytes_since_entry += h.batch_length + LOG_OVERHEAD

    def batches_from(self, pos: int, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        stop = self.size if end is None else end
        while pos < stop:
            h = self.store.header(pos)
            yield pos, h
            pos += h.batch_length + LOG_OVERHEAD

    def lookup(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The batch holding ``offset`` or, past a gap, the first one after it (Kafka's
        ``translateOffset``); None when the segment ends before it."""
        if offset >= self.next_offset or not self._offsets:
            return None
        i = max(bisect_right(self._offsets, offset) - 1, 0)
        for pos, h in self.batches_from(self._positions[i]):
            if last_offset(h) >= offset:
                return pos, h
        return None

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one: bool
    ) -> bytes | memoryview | None:
        """Whole batches from the one holding ``offset``: as many as fit ``max_bytes`` (the
        first whole when ``min_one``), none holding ``max_offset`` or beyond. None when the
        segment ends before ``offset``."""
        found = self.lookup(offset)
        if found is None:
            return None
        start, first = found
        limit = self.size
        if max_offset is not None:
            capped = self.lookup(max_offset)
            if capped is not None:
                limit = capped[0]
        first_end = start + first.batch_length + LOG_OVERHEAD
        if start >= limit or (first_end - start > max_bytes and not min_one):
            return b""
        budget = start + max(max_bytes, 0)
        if limit <= budget:
            end = limit
        elif first_end >= budget:
            end = first_end
        else:  # the last batch boundary within the budget, from the nearest index entry
            i = bisect_right(self._positions, budget) - 1
            end = max(self._positions[i], first_end)
            for pos, h in self.batches_from(end, limit):
                if pos + h.batch_length + LOG_OVERHEAD > budget:
                    break
                end = pos + h.batch_length + LOG_OVERHEAD
        return self.store.read(start, end - start)

    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding ``offset`` and every later one (a batch is never split);
        returns the bytes dropped."""
        found = self.lookup(offset)
        if found is None:
            return 0
        pos, h = found
        self.store.truncate(pos)  # raises LogStorageError, nothing changed
        dropped = self.size - pos
        self.size = pos
        self.next_offset = h.base_offset
        k = bisect_left(self._positions, pos)
        del self._offsets[k:], self._positions[k:], self._max_ts[k:]
        if self._offsets:  # the last entry's running maximum and byte count, recomputed
            top = self._max_ts[-2] if len(self._max_ts) > 1 else NO_TIMESTAMP
            self._bytes_since_entry = 0
            for _, kept in self.batches_from(self._positions[-1]):
                top = max(top, kept.max_timestamp)
                self._bytes_since_entry += kept.batch_length + LOG_OVERHEAD
            self._max_ts[-1] = top
        else:
            self._bytes_since_entry = 0
        return dropped

    def find_offset_by_timestamp(
        self, target: int, start_offset: int
    ) -> tuple[int, int, int] | None:
        """``(offset, timestamp, partition leader epoch)`` of the first record at or after
        ``target`` with an offset >= ``start_offset`` (Kafka's ``findOffsetByTimestamp``)."""
        i = bisect_left(self._max_ts, target)
        if i == len(self._max_ts):
            return None
        for pos, h in self.batches_from(self._positions[i]):
            if h.max_timestamp >= target and last_offset(h) >= start_offset:
                batch = self.store.read(pos, h.batch_length + LOG_OVERHEAD)
                hit = first_at_or_after(batch, h, target, start_offset)
                if hit is not None:
                    return hit[0], hit[1], h.partition_leader_epoch
        return None

    def close(self) -> None:
        self.store.close()

    def delete(self) -> None:
        self.store.delete()
