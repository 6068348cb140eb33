"""Producer state from batches already stored (Kafka's ``loadProducersFromRecords``): those a
follower replicated, those recovery walks at start, and those a truncation replays from an
in-memory snapshot (:mod:`kmeta.log.producer.producer_state`). Only batches with a producer id count;
a control batch's record is read for its COMMIT/ABORT.

With snapshot files (:mod:`kmeta.log.producer.producer_snapshot`), recovery starts from the latest one
that reads (a corrupt one is deleted, said in a warning, and the one before it tried) and
applies the batches from its offset on. Below it only transactional batches and markers are
applied, to a scratch state whose aborted-transaction index is kept (Kafka keeps that index in
``.txnindex`` files; here it is rebuilt, which costs a flag test per batch below the
snapshot). A snapshot outside the recovered log (past its end after a crash cut it, or below
its first segment) is not used: every batch is applied instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kmeta.log.producer.producer_snapshot import CorruptSnapshotError, ProducerSnapshotFiles
from kmeta.log.producer.producer_state import ProducerStateManager
from kmeta.log.record.batch import Buffer
from kmeta.log.record.control import read_end_txn_marker
from kmeta.log.segment import LogSegment
from kmeta.protocol.records.record_batch import BatchHeader

Apply = Callable[[Buffer | memoryview, int, BatchHeader], None]


def apply_stored(state: ProducerStateManager, data: Buffer | memoryview, pos: int, h: BatchHeader) -> None:
    """One stored batch (``h``, at ``pos`` of ``data``) with a producer id into ``state``."""
    marker = None
    if h.is_control:
        marker = read_end_txn_marker(memoryview(data)[pos : pos + h.size_in_bytes], h)
    state.apply(h, marker)


def replay(state: ProducerStateManager, segments: Sequence[LogSegment], start: int, apply: Apply | None = None) -> None:
    """Every batch from offset ``start`` on (-1: from the first segment's start) into
    ``state`` (or to ``apply``), read again from the segments (headers; a control batch's
    record)."""
    for segment in segments:
        if segment.next_offset <= start:
            continue
        found = segment.lookup(start) if start > segment.base_offset else None
        for pos, h in segment.batches_from(0 if found is None else found[0]):
            if h.producer_id >= 0:
                stored = segment.store.read(pos, h.size_in_bytes) if h.is_control else b""
                if apply is None:
                    apply_stored(state, stored, 0, h)
                else:
                    apply(stored, 0, h)


class ProducerRecovery:
    """The producer state of a log being recovered or rebuilt: :meth:`on_batch` sees every
    batch in offset order, :meth:`finish` settles; ``warnings`` says what was ignored."""

    __slots__ = ("_below", "files", "start", "state", "warnings")

    def __init__(self, state: ProducerStateManager, files: ProducerSnapshotFiles, upper: int | None = None) -> None:
        """From the latest snapshot (at or below ``upper`` when given) that reads."""
        self.state, self.files = state, files
        self.warnings: list[str] = []
        self.start = -1  # (-1: no snapshot, every batch applied)
        self._below = ProducerStateManager()
        state.clear()
        for offset in reversed(files.offsets):
            if upper is not None and offset > upper:
                continue
            try:
                entries = files.read(offset)
            except CorruptSnapshotError as exc:
                self.warnings.append(f"producer snapshot {files.path(offset)} ignored (the log is replayed instead): {exc}")
                files.discard(offset)
                continue
            state.load(offset, entries)
            self.start = offset
            break

    def on_batch(self, data: Buffer | memoryview, pos: int, h: BatchHeader) -> None:
        if h.producer_id < 0:
            return
        if h.base_offset >= self.start:
            apply_stored(self.state, data, pos, h)
        elif h.is_transactional:  # (markers too: theirs is set)
            apply_stored(self._below, data, pos, h)

    def finish(self, segments: Sequence[LogSegment], log_start_offset: int) -> list[str]:
        """After the last batch: the index below the snapshot joins the state; snapshot files
        past the log end go; a snapshot outside the log means a full replay."""
        state, end = self.state, segments[-1].next_offset
        self.files.delete_above(end)
        if self.start >= 0 and not segments[0].base_offset <= self.start <= end:
            state.clear()
            replay(state, segments, -1)
        else:
            state.aborted[:0] = self._below.aborted
            state.unreplicated[:0] = self._below.unreplicated
        state.truncate_head(log_start_offset)
        return self.warnings


def rebuild(
    state: ProducerStateManager, files: ProducerSnapshotFiles | None, segments: Sequence[LogSegment],
    end: int, log_start_offset: int,
) -> list[str]:  # fmt: skip
    """A truncation to ``end`` below every in-memory snapshot (``truncateAndReload``): from the
    latest snapshot file at or below it, else from the first batch."""
    if files is None:
        state.clear()
        replay(state, segments, -1)
        state.truncate_head(log_start_offset)
        return []
    recovery = ProducerRecovery(state, files, end)
    replay(state, segments, -1, recovery.on_batch)
    return recovery.finish(segments, log_start_offset)
