"""Producer state from batches already stored (Kafka's ``loadProducersFromRecords``): those a
follower replicated, those recovery walks at start, and those a truncation replays from an
in-memory snapshot (:mod:`kmeta.log.producer_state`). Only batches with a producer id count;
a control batch's record is read for its COMMIT/ABORT."""

from __future__ import annotations

from collections.abc import Sequence

from kmeta.log.control import read_end_txn_marker
from kmeta.log.producer_state import ProducerStateManager
from kmeta.log.segment import LogSegment
from kmeta.log.stores import Buffer
from kmeta.protocol.record_batch import BatchHeader


def apply_stored(state: ProducerStateManager, data: Buffer | memoryview, pos: int, h: BatchHeader) -> None:
    """One stored batch (``h``, at ``pos`` of ``data``) with a producer id into ``state``."""
    marker = None
    if h.is_control:
        marker = read_end_txn_marker(memoryview(data)[pos : pos + h.size_in_bytes], h)
    state.apply(h, marker)


def replay(state: ProducerStateManager, segments: Sequence[LogSegment], start: int) -> None:
    """Every batch from offset ``start`` on (-1: from the first segment's start) into
    ``state``, read again from the segments (headers; a control batch's record)."""
    for segment in segments:
        if segment.next_offset <= start:
            continue
        found = segment.lookup(start) if start > segment.base_offset else None
        for pos, h in segment.batches_from(0 if found is None else found[0]):
            if h.producer_id >= 0:
                stored = segment.store.read(pos, h.size_in_bytes) if h.is_control else b""
                apply_stored(state, stored, 0, h)
