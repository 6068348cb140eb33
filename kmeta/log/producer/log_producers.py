"""The producer side of one partition log (what Kafka's ``UnifiedLog`` asks of its
``ProducerStateManager``): the state (:mod:`kmeta.log.producer.producer_state`) and, for a log with a
directory, its snapshot files (:mod:`kmeta.log.producer.producer_snapshot`), kept in step with what
happens to the log: a leader's batch checked before it is stored, every stored batch applied,
a snapshot at each segment roll and on a clean close, the snapshots of deleted segments
removed, and the state rebuilt after a truncation or at recovery
(:mod:`kmeta.log.producer.producer_replay`). Pure data but for the snapshot files."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence

from kmeta.log.errors import LogStorageError
from kmeta.log.producer.producer_entry import BatchMetadata
from kmeta.log.producer.producer_replay import ProducerRecovery, apply_stored, rebuild, replay
from kmeta.log.producer.producer_snapshot import ProducerSnapshotFiles
from kmeta.log.producer.producer_state import ProducerStateManager
from kmeta.log.record.batch import Buffer
from kmeta.log.segment import LogSegment
from kmeta.protocol.records.record_batch import BatchHeader


class LogProducers:
    __slots__ = ("files", "state")

    def __init__(self, dir_path: str | None, ensure_dir: Callable[[], None]) -> None:
        self.state = ProducerStateManager()
        self.files = ProducerSnapshotFiles(dir_path, ensure_dir) if dir_path is not None else None

    def recovery(self) -> ProducerRecovery | None:
        """What recovers the state while the loader walks the batches (None: the log has no
        directory to recover)."""
        if self.files is None or not os.path.isdir(self.files.dir):
            return None
        return ProducerRecovery(self.state, self.files)

    def check_leader_batch(self, h: BatchHeader, coordinator: bool) -> BatchMetadata | None:
        """The checks of a client's batch (a ``coordinator``'s, Kafka's origin COORDINATOR,
        only its epoch and transaction's): the batch it repeats, None, or a LogError."""
        if coordinator:
            self.state.check_coordinator_batch(h)
            return None
        return self.state.check_data_batch(h)

    def stored(self, data: Buffer, batches: Sequence[tuple[int, BatchHeader]]) -> None:
        for pos, h in batches:
            if h.producer_id >= 0:
                apply_stored(self.state, data, pos, h)

    def take_snapshot(self, offset: int) -> None:
        """Kafka's ``takeSnapshot`` at a roll or a clean close (when there are producers): the
        state before ``offset``. One that cannot be written is skipped (it only makes the next
        recovery replay more): the append that rolled has been stored."""
        if self.files is not None and self.state.producers:
            with contextlib.suppress(LogStorageError):
                self.files.write(offset, self.state.producers.values())

    def segments_deleted(self, first_base_offset: int) -> None:
        """The snapshots of the segments that went (below the first one left)."""
        if self.files is not None:
            self.files.delete_below(first_base_offset)

    def truncated(self, end: int, segments: Sequence[LogSegment], log_start_offset: int) -> None:
        """The log now ends at ``end``: later snapshot files go, and the state goes back to
        the latest in-memory snapshot at or below it (Kafka's ``rebuildProducerState``), else
        to a snapshot file or the first batch, and the batches after it are applied again."""
        if self.files is not None:
            self.files.delete_above(end)
        start = self.state.truncate(end)
        if start is not None and start >= 0:
            replay(self.state, segments, start)
        elif start is not None:
            rebuild(self.state, self.files, segments, end, log_start_offset)

    def clear(self) -> None:
        """Every segment went: the state and every snapshot file too."""
        self.state.clear()
        if self.files is not None:
            self.files.delete_below(1 << 63)
