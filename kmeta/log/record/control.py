"""Control batches: the COMMIT/ABORT marker a transaction coordinator has a partition leader
write (Kafka's ``EndTransactionMarker`` in a batch built by ``MemoryRecords.withEndTransactionMarker``).

A control batch has attributes bits 4 (transactional) and 5 (control) set, the producer id
and epoch of the transaction, no sequence (-1), and one uncompressed record whose key is
``version int16 (0) | type int16`` (0 ABORT, 1 COMMIT) and whose value is
``version int16 (0) | coordinator epoch int32``. Pure bytes, no I/O.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kmeta.log.record.batch import COMPRESSION_MASK
from kmeta.protocol.records.record_batch import (
    LOG_OVERHEAD,
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    crc32c,
)

ABORT, COMMIT = 0, 1
#: attributes of a control batch: transactional | control
CONTROL_ATTRIBUTES = 0x10 | 0x20
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
_AFTER_CRC = struct.Struct(">hiqqqhii")


class EndTxnMarker(NamedTuple):
    commit: bool
    coordinator_epoch: int


def _varint(value: int) -> bytes:
    """A zigzag varint (the record's small fields: every value here fits in one or two bytes)."""
    v = (value << 1) ^ (value >> 63)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def end_txn_marker_batch(
    producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
    timestamp_ms: int, base_offset: int = 0, leader_epoch: int = -1,
) -> bytes:  # fmt: skip
    """The control batch of one marker, at ``base_offset`` with ``leader_epoch`` (outside the
    CRC, as a leader sets them)."""
    key = _KEY.pack(0, COMMIT if commit else ABORT)
    value = _VALUE.pack(0, coordinator_epoch)
    body = b"".join(
        (b"\x00", _varint(0), _varint(0), _varint(len(key)), key, _varint(len(value)), value, b"\x00")
    )
    record = _varint(len(body)) + body
    after_crc = _AFTER_CRC.pack(
        CONTROL_ATTRIBUTES, 0, timestamp_ms, timestamp_ms, producer_id, producer_epoch, -1, 1
    ) + record  # fmt: skip
    length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", base_offset, length, leader_epoch, MAGIC_V2, crc32c(after_crc)) + after_crc


def _read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def read_end_txn_marker(batch: bytes | memoryview, h: BatchHeader) -> EndTxnMarker | None:
    """The marker a control batch holds (its first record), or None when it holds none this
    broker reads: no record (Kafka: the transaction was cleaned away), a compressed batch, a
    key that is not a COMMIT/ABORT (another control type), bytes that do not parse."""
    if h.record_count < 1 or h.attributes & COMPRESSION_MASK:
        return None
    region = memoryview(batch)[RECORD_BATCH_OVERHEAD : h.batch_length + LOG_OVERHEAD]
    try:
        _, pos = _read_varint(region, 0)  # (the record's length)
        pos += 1  # attributes
        _, pos = _read_varint(region, pos)  # timestamp delta
        _, pos = _read_varint(region, pos)  # offset delta
        key_len, pos = _read_varint(region, pos)
        if key_len < _KEY.size:
            return None
        _, kind = _KEY.unpack_from(region, pos)
        pos += key_len
        value_len, pos = _read_varint(region, pos)
        if kind not in (ABORT, COMMIT) or value_len < _VALUE.size:
            return None
        _, coordinator_epoch = _VALUE.unpack_from(region, pos)
    except (ValueError, struct.error):
        return None
    return EndTxnMarker(kind == COMMIT, coordinator_epoch)
