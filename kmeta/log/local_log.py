"""The segments of one partition log and its end offset (Kafka's ``LocalLog``): where bytes
go on append, where a read finds them, and how segments roll, truncate and go.

Offsets are contiguous: each segment starts where the one before it ended, so the segment
holding an offset is a bisect over the base offsets.
"""

from __future__ import annotations

import contextlib
import os
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import TypeAlias

from kmeta.log.errors import LogStorageError
from kmeta.log.record.batch import Buffer, last_offset
from kmeta.log.segment import LogSegment
from kmeta.log.stores import FileStore, MemoryAccount, MemoryStore
from kmeta.protocol.records.record_batch import BatchHeader

_INT_MAX = (1 << 31) - 1
Batches: TypeAlias = Sequence[tuple[int, BatchHeader]]
#: a segment a cleaning is writing; swapped in by a rename (recovery deletes a leftover)
CLEANED_SUFFIX = ".cleaned"


def segment_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


class LocalLog:
    __slots__ = (
        "_bases",
        "_dir_ready",
        "_on_dir_created",
        "account",
        "dir",
        "index_interval_bytes",
        "log_end_offset",
        "segments",
    )

    def __init__(
        self,
        dir_path: str | None,
        account: MemoryAccount | None,
        index_interval_bytes: int,
        on_dir_created: Callable[[], None] = lambda: None,
    ) -> None:
        self.dir = dir_path
        self.account = account
        self.index_interval_bytes = index_interval_bytes
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.log_end_offset = 0
        self._dir_ready = dir_path is not None and os.path.isdir(dir_path)
        self._on_dir_created = on_dir_created

    def ensure_dir(self) -> None:
        """Create the partition's directory at its first write (an idle partition costs no
        inode), raising LogStorageError when that fails."""
        if self._dir_ready or self.dir is None:
            return
        try:
            os.makedirs(self.dir, mode=0o700, exist_ok=True)  # (records: the owner's only)
            self._on_dir_created()
        except OSError as exc:
            raise LogStorageError(f"Error while creating log directory {self.dir}: {exc}") from exc
        self._dir_ready = True

    def new_segment(self, base_offset: int) -> LogSegment:
        store: MemoryStore | FileStore
        if self.dir is None:
            store = MemoryStore(self.account)
        else:
            store = FileStore(
                os.path.join(self.dir, segment_file_name(base_offset)), self.ensure_dir
            )
        return LogSegment(base_offset, store, self.index_interval_bytes)

    def add_segment(self, segment: LogSegment) -> None:
        if self.segments:
            self.active.store.seal()  # (a rolled segment never changes in place again)
        self.segments.append(segment)
        self._bases.append(segment.base_offset)
        self.log_end_offset = segment.next_offset

    def start_at(self, offset: int) -> None:
        """An empty log whose next offset is ``offset`` (existing segments must be gone)."""
        self.segments, self._bases = [], []
        self.add_segment(self.new_segment(offset))

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def append(
        self,
        data: Buffer,
        prefix: bytes | None,
        batches: Sequence[tuple[int, BatchHeader]],
        now_ms: int,
        segment_bytes: int,
        segment_ms: int = 1 << 62,
    ) -> None:
        """Append whole batches to the active segment, rolling first when they would take it
        past ``segment_bytes``, when it has been open segment.ms (by the batches' timestamps)
        or past relative offsets an int holds (Kafka's ``shouldRoll``). The new segment joins
        the log only once the write succeeded. A memory log over its account's cap (the last
        retention could not bring it under: what is left may not be deleted) refuses the
        append, as Kafka refuses appends on a full disk."""
        segment = self.active
        last = last_offset(batches[-1][1])
        if self.dir is None and self.account is not None:
            segment_bytes = min(segment_bytes, self.account.max_segment_bytes)
            if self.account.full and self.account.bytes + len(data) > self.account.limit:
                raise LogStorageError(
                    f"Memory cap of {self.account.limit} bytes reached and nothing more may be "
                    "deleted (compacted topics' records are never dropped): append refused"
                )
        max_ts = max(h.max_timestamp for _, h in batches)
        if segment.size > 0 and (
            segment.size + len(data) > segment_bytes
            or last - segment.base_offset > _INT_MAX
            or segment.time_waited_for_roll(now_ms, max_ts) > segment_ms
        ):
            segment = self.new_segment(self.log_end_offset)
        try:
            segment.append(data, prefix, batches, now_ms)
        except LogStorageError:
            if segment is not self.active:  # a file the failed write created goes too
                with contextlib.suppress(OSError):
                    segment.delete()
            raise
        if segment is not self.active:
            self.add_segment(segment)
        self.log_end_offset = last + 1

    def roll(self) -> None:
        """A new empty active segment at the log end (nothing to do if the active one is
        empty already)."""
        if self.active.size > 0:
            self.add_segment(self.new_segment(self.log_end_offset))

    def replace(self, old: Sequence[LogSegment], data: bytes, batches: Batches, now_ms: int) -> int:
        """Swap consecutive closed segments for one at the first's base offset holding
        ``data`` (a cleaning's output; Kafka's ``replaceSegments``). With a log dir the new
        file is written beside as ``.cleaned``, fsynced, renamed over the first's file, then
        the others' files go: a crash between leaves files recovery knows to drop. Returns
        the bytes freed."""
        i = next(n for n, s in enumerate(self.segments) if s is old[0])
        if self.segments[i : i + len(old)] != list(old) or self.segments[-1] in old:
            raise ValueError("only consecutive closed segments are replaced")
        if isinstance(self.active.store, FileStore):
            # (an active segment rolled but never written has no file yet; were the last
            # closed batches cleaned away, recovery would find a log end below the real one)
            self.active.store.create()
        base = old[0].base_offset
        before = sum(s.size for s in old)
        if self.dir is None:
            new = LogSegment(base, MemoryStore(self.account), self.index_interval_bytes)
        else:
            final = os.path.join(self.dir, segment_file_name(base))
            store = FileStore(final + CLEANED_SUFFIX, self.ensure_dir)
            new = LogSegment(base, store, self.index_interval_bytes)
        try:
            if batches:
                new.append(data, None, batches, now_ms)
            if isinstance(new.store, FileStore):
                new.store.create()
                new.store.flush()
                os.replace(new.store.path, final)
                new.store.path = final
                _fsync_dir(self.dir or "")
        except (OSError, LogStorageError) as exc:
            with contextlib.suppress(OSError):
                new.delete()
            raise LogStorageError(f"Error while swapping in a cleaned segment: {exc}") from exc
        new.store.seal()
        new.last_modified_ms = max(s.last_modified_ms for s in old)
        new.append_seq = max(s.append_seq for s in old)
        old[0].close()  # (with a log dir its file is the new one's now)
        if self.dir is None:
            old[0].delete()
        for segment in old[1:]:
            self._delete(segment)
        self.segments[i : i + len(old)] = [new]
        self._bases[i : i + len(old)] = [base]
        return before - new.size

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one: bool
    ) -> bytes | memoryview:
        i = max(bisect_right(self._bases, offset) - 1, 0)
        for segment in self.segments[i:]:
            records = segment.read(offset, max_bytes, max_offset, min_one)
            if records is not None:
                return records
        return b""

    def deletable(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool], high_watermark: int
    ) -> int:
        """How many of the oldest segments may go (Kafka's ``deletableSegments``): while the
        predicate holds, never a segment with offsets at or past the high watermark, never a
        last segment that is empty."""
        count = 0
        for i, segment in enumerate(self.segments):
            following = self.segments[i + 1] if i + 1 < len(self.segments) else None
            upper = following.base_offset if following is not None else self.log_end_offset
            if high_watermark < upper or not predicate(segment, following):
                break
            if following is None and segment.size == 0:
                break
            count += 1
        return count

    def delete_oldest(self, count: int) -> int:
        """Remove the ``count`` oldest segments (the caller rolled if that is all of them);
        returns the bytes freed."""
        freed = 0
        for segment in self.segments[:count]:
            freed += segment.size
            self._delete(segment)
        del self.segments[:count], self._bases[:count]
        return freed

    def truncate_to(self, offset: int) -> int:
        """Drop everything from the batch holding ``offset`` on; returns the bytes dropped."""
        dropped = 0
        while len(self.segments) > 1 and self.segments[-1].base_offset > offset:
            segment = self.segments.pop()
            self._bases.pop()
            dropped += segment.size
            self._delete(segment)
        dropped += self.active.truncate_to(offset)
        self.active.store.unseal()  # (a closed segment may be last now: past a cleaned gap)
        self.log_end_offset = self.active.next_offset
        return dropped

    def truncate_fully(self, offset: int) -> int:
        dropped = self.size_in_bytes
        for segment in self.segments:
            self._delete(segment)
        self.start_at(offset)
        return dropped

    @staticmethod
    def _delete(segment: LogSegment) -> None:
        try:
            segment.delete()
        except OSError as exc:
            raise LogStorageError(f"Error while deleting a segment: {exc}") from exc

    def flush(self) -> None:
        for segment in self.segments:
            segment.store.flush()
        if self.dir is not None and self._dir_ready:
            _fsync_dir(self.dir)  # new segment files' names

    def close(self) -> None:
        for segment in self.segments:
            segment.close()


def _fsync_dir(path: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
