"""The records of a v2 batch, decoded as far as the log cleaner and a compacted topic's key
check need, and a batch built again from the records kept (Kafka's ``DefaultRecord`` and
``MemoryRecordsBuilder`` as ``MemoryRecords.filterTo`` uses them).

A record is ``length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
keyLength varint | key | valueLength varint | value | headers``. A kept record is copied byte
for byte from its offset delta on; only its timestamp delta is written again, when the batch
takes a delete horizon as its base timestamp (KIP-534: attributes bit 6, the base timestamp
then holds the horizon, and each record's delta is against it)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from kmeta.log.errors import CorruptRecordError, InvalidRecordError
from kmeta.log.record import codecs
from kmeta.log.record.batch import COMPRESSION_MASK, HEADER, TIMESTAMP_TYPE_MASK
from kmeta.protocol.records.record_batch import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    crc32c,
)

#: attributes bit 6: the base timestamp is the batch's delete horizon (KIP-534)
DELETE_HORIZON_MASK = 0x40
NO_TIMESTAMP = -1


class RecordFormatError(ValueError):
    """Records that do not parse (a length past the batch, a bad varint, a bad codec)."""


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    has_value: bool
    timestamp_delta: int  # as stored (against the batch's base timestamp)
    tail: bytes  # the record from its offset delta to its end


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    if pos < len(buf) and buf[pos] < 0x80:  # (one byte: most deltas and lengths)
        b = buf[pos]
        return (b >> 1) ^ -(b & 1), pos + 1
    result, shift = 0, 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise RecordFormatError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def _put_varint(out: bytearray, value: int) -> None:
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def delete_horizon(h: BatchHeader) -> int | None:
    """The batch's delete horizon, when a cleaning set one."""
    return h.base_timestamp if h.attributes & DELETE_HORIZON_MASK else None


def records_of(batch: bytes | bytearray | memoryview, h: BatchHeader) -> list[Record]:
    """Every record of one stored batch (its whole bytes, header included); raises
    RecordFormatError."""
    body = bytes(memoryview(batch)[RECORD_BATCH_OVERHEAD : h.batch_length + LOG_OVERHEAD])
    codec = h.attributes & COMPRESSION_MASK
    if codec:
        try:
            body = codecs.decompress(codec, body)
        except codecs.CodecError as exc:
            raise RecordFormatError(str(exc)) from None
    append_time = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_MASK else None
    out: list[Record] = []
    pos = 0
    for _ in range(h.record_count):
        length, pos = _varint(body, pos)
        end = pos + length
        if length < 3 or end > len(body):
            raise RecordFormatError("record length past the batch")
        ts_delta, p = _varint(body, pos + 1)
        tail_at = p
        offset_delta, p = _varint(body, p)
        key_len, p = _varint(body, p)
        key = None
        if key_len >= 0:
            key, p = body[p : p + key_len], p + key_len
        value_len, p = _varint(body, p)
        if p > end or (value_len > 0 and p + value_len > end):
            raise RecordFormatError("record fields past its length")
        ts = append_time if append_time is not None else h.base_timestamp + ts_delta
        out.append(
            Record(h.base_offset + offset_delta, ts, key, value_len >= 0, ts_delta, body[tail_at:end])
        )
        pos = end
    return out


def build_batch(h: BatchHeader, records: Sequence[Record], horizon: int | None) -> bytes:
    """The batch ``h`` with only ``records``: same base and last offset (Kafka keeps the last
    offset so the producer's last sequence stays), producer id, epoch, base sequence, leader
    epoch and codec; ``horizon`` (else the batch's own, if any) as a delete horizon; the
    record count, max timestamp and CRC-32C new. No records: a header-only batch (Kafka's
    ``writeEmptyHeader``, kept for a producer's last sequence)."""
    attributes = h.attributes & ~DELETE_HORIZON_MASK
    if horizon is None:
        horizon = delete_horizon(h)
    if horizon is not None:
        attributes |= DELETE_HORIZON_MASK
        base_ts = horizon
    else:
        base_ts = h.base_timestamp if records else h.max_timestamp
    raw = bytearray()
    for r in records:
        body = bytearray(b"\x00")
        _put_varint(body, h.base_timestamp + r.timestamp_delta - base_ts)
        body += r.tail
        _put_varint(raw, len(body))
        raw += body
    codec = h.attributes & COMPRESSION_MASK
    payload = codecs.compress(codec, bytes(raw)) if codec and records else bytes(raw)
    if h.attributes & TIMESTAMP_TYPE_MASK:
        max_ts = h.max_timestamp
    else:
        max_ts = max((r.timestamp for r in records), default=h.max_timestamp)
    if not records:
        attributes &= ~COMPRESSION_MASK  # (Kafka's empty header says no codec)
    length = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload)
    header = bytearray(
        HEADER.pack(
            h.base_offset, length, h.partition_leader_epoch, 2, 0, attributes,
            h.last_offset_delta, base_ts, max_ts, h.producer_id, h.producer_epoch,
            h.base_sequence, len(records),
        )
    )  # fmt: skip
    out = header + payload
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


def check_keys(batch: bytes | bytearray | memoryview, h: BatchHeader, partition: str) -> None:
    """A compacted topic takes no record without a key (Kafka's ``LogValidator.validateKey``:
    INVALID_RECORD); records that do not parse are CORRUPT_MESSAGE."""
    try:
        records = records_of(batch, h)
    except RecordFormatError as exc:
        raise CorruptRecordError(f"Record is corrupt: {exc}") from None
    if any(r.key is None for r in records):
        raise InvalidRecordError(
            f"Compacted topic cannot accept message without key in topic partition {partition}."
        )
