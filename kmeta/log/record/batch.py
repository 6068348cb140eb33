"""Record batches (magic 2) as the log handles them: the header read, a run of stored or
replicated batches walked and checked, and the two in-place rewrites a leader makes.

The log never decodes records on its hot path: a batch is bytes plus its 61-byte header
(layout in :mod:`kmeta.protocol.records.record_batch`). The base offset (bytes 0-7) and the partition
leader epoch (bytes 12-15) lie outside the CRC, which covers attributes to the end, so a
leader sets them without touching the CRC (Kafka's ``DefaultRecordBatch.setLastOffset`` and
``setPartitionLeaderEpoch``). LogAppendTime changes the attributes and maxTimestamp, which the
CRC covers: that path recomputes it (``setMaxTimestamp``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from kmeta.log.errors import CorruptRecordError, InvalidRecordError, LogError
from kmeta.protocol.records.record_batch import (
    LOG_OVERHEAD,
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    crc32c,
)

#: the bytes the log holds and hands on: as received, a growing segment, or a view of either
Buffer = bytes | bytearray | memoryview
HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_ATTRIBUTES_OFFSET = 21
_MAX_TIMESTAMP_OFFSET = 35
#: attributes bit 3: the batch's timestamps are LogAppendTime
TIMESTAMP_TYPE_MASK = 0x08
COMPRESSION_MASK = 0x07
#: RecordBatch.NO_PARTITION_LEADER_EPOCH / NO_TIMESTAMP
NO_EPOCH = -1
NO_TIMESTAMP = -1


def header_at(data: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    return BatchHeader(*HEADER.unpack_from(data, pos))


def last_offset(h: BatchHeader) -> int:
    return h.base_offset + h.last_offset_delta


class Walked(NamedTuple):
    """Whole valid batches at the front of a buffer: ``(position, header)`` each, the bytes
    they span, and why the walk stopped early (None: the end, or a trailing partial batch)."""

    batches: list[tuple[int, BatchHeader]]
    valid_bytes: int
    problem: LogError | None


def walk_batches(
    data: bytes | bytearray | memoryview, next_offset: int | None, check_crc: bool = True
) -> Walked:
    """Kafka's ``ByteBufferLogInputStream`` plus ``DefaultRecordBatch.ensureValid``, and the
    order a log needs: each batch starts at or past ``next_offset`` (when given) and past the
    one before it (a compacted log has gaps between batches; Kafka's follower append and
    recovery allow them too). A trailing partial batch is no batch (a Fetch may end in one, a
    crash may leave one)."""
    view = memoryview(data)
    batches: list[tuple[int, BatchHeader]] = []
    pos, end = 0, len(view)
    problem: LogError | None = None
    while end - pos >= LOG_OVERHEAD:
        (length,) = struct.unpack_from(">i", view, pos + 8)
        size = length + LOG_OVERHEAD
        if size < RECORD_BATCH_OVERHEAD:
            problem = CorruptRecordError(f"Record batch size {size} at {pos} is below the header's")
            break
        if end - pos < size:
            break
        h = header_at(view, pos)
        if h.magic != MAGIC_V2:
            problem = CorruptRecordError(f"Record batch at {pos} has magic {h.magic}, not 2")
            break
        if check_crc and crc32c(view[pos + _ATTRIBUTES_OFFSET : pos + size]) != h.crc:
            problem = CorruptRecordError(f"Record is corrupt (stored crc = {h.crc})")
            break
        if h.last_offset_delta < 0:
            problem = InvalidRecordError(f"Batch has an invalid offset range at {pos}")
            break
        if next_offset is not None and h.base_offset < next_offset:
            problem = InvalidRecordError(
                f"Batch at base offset {h.base_offset} does not follow offset {next_offset - 1}"
            )
            break
        batches.append((pos, h))
        next_offset = last_offset(h) + 1
        pos += size
    return Walked(batches, pos, problem)


def headers(data: bytes | bytearray | memoryview) -> Iterator[BatchHeader]:
    """The headers of whole batches in ``data`` (already checked), in order."""
    pos = 0
    while len(data) - pos >= RECORD_BATCH_OVERHEAD:
        h = header_at(data, pos)
        yield h
        pos += h.batch_length + LOG_OVERHEAD


def offset_and_epoch_prefix(h: BatchHeader, base_offset: int, leader_epoch: int) -> bytes:
    """The batch's first 16 bytes with the base offset and partition leader epoch a leader
    assigns: written over the received bytes as they are stored (outside the CRC)."""
    return _PREFIX.pack(base_offset, h.batch_length, leader_epoch)


def with_log_append_time(
    data: bytes | bytearray | memoryview, base_offset: int, leader_epoch: int, now_ms: int
) -> bytearray:
    """A copy of the batch as a LogAppendTime topic keeps it: the timestamp-type bit set,
    maxTimestamp the broker's clock, and the CRC recomputed over the changed bytes."""
    out = bytearray(data)
    h = header_at(out)
    _PREFIX.pack_into(out, 0, base_offset, h.batch_length, leader_epoch)
    struct.pack_into(">h", out, _ATTRIBUTES_OFFSET, h.attributes | TIMESTAMP_TYPE_MASK)
    struct.pack_into(">q", out, _MAX_TIMESTAMP_OFFSET, now_ms)
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[_ATTRIBUTES_OFFSET:]))
    return out
