"""The leader-epoch cache (Kafka's ``LeaderEpochFileCache``): for each leader epoch the offset
its leader started writing at, persisted as Kafka's ``leader-epoch-checkpoint`` file::

    0            <- version
    2            <- entries
    0 0          <- epoch start_offset
    3 1200

Entries are kept monotonic in both epoch and start offset. A change is written to a temporary
file and renamed over the checkpoint before it takes effect in memory, so a failed write
(LogStorageError) leaves both as they were.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import NamedTuple

from kmeta.log.checkpoints import private_opener
from kmeta.log.errors import LogStorageError

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
CHECKPOINT_FILE = "leader-epoch-checkpoint"


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    __slots__ = (
        "_ensure_dir",
        "entries",
        "path",
    )

    def __init__(self, path: str | None, ensure_dir: Callable[[], None] = lambda: None) -> None:
        self.path = path
        self._ensure_dir = ensure_dir
        self.entries: list[EpochEntry] = []

    def load(self) -> None:
        """Read the checkpoint (a missing or unreadable one is an empty cache: recovery then
        re-derives the epochs from the batches' own partitionLeaderEpoch)."""
        if self.path is None:
            return
        try:
            with open(self.path, encoding="ascii") as f:
                lines = f.read().split("\n")
            version, count = int(lines[0]), int(lines[1])
            entries = [EpochEntry(*map(int, line.split())) for line in lines[2 : 2 + count]]
        except (OSError, ValueError, IndexError, TypeError):
            return
        if version == 0 and len(entries) == count:
            self.entries = entries

    def _commit(self, entries: list[EpochEntry]) -> None:
        if entries == self.entries:
            return
        if self.path is not None:
            tmp = self.path + ".tmp"
            text = f"0\n{len(entries)}\n" + "".join(f"{e} {o}\n" for e, o in entries)
            try:
                self._ensure_dir()
                with open(tmp, "w", encoding="ascii", opener=private_opener) as f:
                    f.write(text)
                os.replace(tmp, self.path)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise LogStorageError(f"Error while writing {self.path}: {exc}") from exc
        self.entries = entries

    @property
    def latest_epoch(self) -> int | None:
        return self.entries[-1].epoch if self.entries else None

    def earliest_entry(self) -> EpochEntry | None:
        return self.entries[0] if self.entries else None

    def needs_assign(self, epoch: int, start_offset: int) -> bool:
        """Kafka's ``isUpdateNeeded``: a new epoch, or the latest one starting earlier."""
        if epoch < 0 or start_offset < 0:
            return False
        if not self.entries:
            return True
        last = self.entries[-1]
        return epoch != last.epoch or start_offset < last.start_offset

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``; entries this one contradicts
        (an epoch as high or higher, or a start as late or later) go first."""
        if not self.needs_assign(epoch, start_offset):
            return
        kept = [e for e in self.entries if e.epoch < epoch and e.start_offset < start_offset]
        self._commit([*kept, EpochEntry(epoch, start_offset)])

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds ``offset`` (Kafka's ``epochForOffset``)."""
        found = None
        for e in self.entries:
            if e.start_offset > offset:
                break
            found = e.epoch
        return found

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end offset)`` as Kafka's ``endOffsetFor``: the latest epoch ends at the
        log end; an older one where the next higher epoch starts, answered with the largest
        epoch at or below the one asked for; one below every entry with the first entry's
        start; undefined (-1, -1) for -1 or an epoch above every entry."""
        if requested == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self.entries[-1].epoch == requested:
            return requested, log_end_offset
        higher = next((e for e in self.entries if e.epoch > requested), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = [e for e in self.entries if e.epoch <= requested]
        if not floor:
            return requested, higher.start_offset
        return floor[-1].epoch, higher.start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to ``end_offset``: entries starting there or later go."""
        if end_offset >= 0 and self.entries and self.entries[-1].start_offset >= end_offset:
            self._commit([e for e in self.entries if e.start_offset < end_offset])

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved to ``start_offset``: entries starting at or before it collapse
        into the last of them, now starting there."""
        before = [e for e in self.entries if e.start_offset <= start_offset]
        if not before:
            return
        after = [e for e in self.entries if e.start_offset > start_offset]
        self._commit([EpochEntry(before[-1].epoch, start_offset), *after])

    def clear(self) -> None:
        self._commit([])
