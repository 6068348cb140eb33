"""The record batches a coordinator writes to and reads from its internal topic.

A coordinator appends one v2 batch per write, as Kafka's ``CoordinatorRuntime`` builds it
with ``MemoryRecordsBuilder``: base offset 0 and partition leader epoch -1 (the log sets
both), CreateTime, uncompressed (``offsets.topic.compression.codec`` defaults to none), the
producer id and epoch of a transactional write with base sequence 0 (Kafka's
``GroupMetadataManager.storeOffsets`` does the same; a producer id needs a sequence), else -1.

Reading (the shard's load, and the committed tail replayed after each write) walks stored
batches: data batches give each record's offset, key and value; a control batch (a
transaction's COMMIT or ABORT marker, written by WriteTxnMarkers) gives its producer and
whether it committed: its one record's key is ``version int16 | type int16`` (Kafka's
``ControlRecordType``: 0 ABORT, 1 COMMIT). Uncompressed and gzip batches are read; another
codec cannot be in an internal topic (Produce refuses them, and only this module writes).
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterator, Sequence
from typing import NamedTuple, TypeAlias

from kmeta.log.record.batch import COMPRESSION_MASK, header_at, last_offset
from kmeta.protocol.records.record_batch import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    crc32c,
)

#: (key, value); value None is a tombstone
Record: TypeAlias = tuple[bytes, bytes | None]

_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_GZIP = 1
#: ControlRecordType ids (org.apache.kafka.common.record.ControlRecordType)
ABORT, COMMIT = 0, 1
_AFTER_CRC = struct.Struct(">hiqqqhii")
_CONTROL_KEY = struct.Struct(">hh")


class CorruptCoordinatorRecord(ValueError):
    """Stored bytes that do not parse as a coordinator's records."""


def _varint(value: int) -> bytes:
    v = (value << 1) ^ (value >> 63)  # (zigzag)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _sized(value: bytes | None) -> bytes:
    return b"\x01" if value is None else _varint(len(value)) + value  # (varint -1: null)


def encode_batch(
    records: Sequence[Record], *, producer_id: int = -1, producer_epoch: int = -1,
    transactional: bool = False, timestamp_ms: int | None = None,
) -> bytes:  # fmt: skip
    """One v2 batch of ``records`` (at least one), ready for ``append_as_leader``."""
    if not records:
        raise ValueError("a batch holds at least one record")
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    parts: list[bytes] = []
    for delta, (key, value) in enumerate(records):
        body = b"".join((b"\x00", b"\x00", _varint(delta), _sized(key), _sized(value), b"\x00"))
        parts.append(_varint(len(body)))
        parts.append(body)
    attributes = _TRANSACTIONAL if transactional else 0
    sequence = 0 if producer_id >= 0 else -1
    after_crc = _AFTER_CRC.pack(
        attributes, len(records) - 1, ts, ts, producer_id, producer_epoch, sequence, len(records)
    ) + b"".join(parts)  # fmt: skip
    length = 4 + 1 + 4 + len(after_crc)  # (partition leader epoch, magic, crc, the rest)
    return struct.pack(">qiibI", 0, length, -1, 2, crc32c(after_crc)) + after_crc


class DataRecord(NamedTuple):
    offset: int
    producer_id: int
    producer_epoch: int
    key: bytes
    value: bytes | None


class ControlMarker(NamedTuple):
    offset: int
    producer_id: int
    producer_epoch: int
    committed: bool


Entry: TypeAlias = DataRecord | ControlMarker


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes | memoryview) -> None:
        self.buf = buf
        self.pos = 0

    def varint(self) -> int:
        result = shift = 0
        while True:
            if self.pos >= len(self.buf) or shift > 63:
                raise CorruptCoordinatorRecord("truncated varint")
            b = self.buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7

    def sized(self) -> bytes | None:
        n = self.varint()
        if n < 0:
            return None
        end = self.pos + n
        if end > len(self.buf):
            raise CorruptCoordinatorRecord("truncated bytes")
        out = bytes(self.buf[self.pos : end])
        self.pos = end
        return out


def _region(batch: memoryview, h: BatchHeader) -> bytes | memoryview:
    body = batch[RECORD_BATCH_OVERHEAD : h.batch_length + LOG_OVERHEAD]
    codec = h.attributes & COMPRESSION_MASK
    if codec == 0:
        return body
    if codec == _GZIP:
        try:
            return zlib.decompress(body, wbits=16 + zlib.MAX_WBITS)
        except zlib.error as exc:
            raise CorruptCoordinatorRecord(f"gzip: {exc}") from None
    raise CorruptCoordinatorRecord(f"compression codec {codec} in an internal topic")


def _records(batch: memoryview, h: BatchHeader) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of each record of one batch."""
    reader = _Reader(_region(batch, h))
    for _ in range(h.record_count):
        length = reader.varint()
        end = reader.pos + length
        if length < 0 or end > len(reader.buf):
            raise CorruptCoordinatorRecord("record length past the batch")
        reader.pos += 1  # attributes
        reader.varint()  # timestamp delta
        offset_delta = reader.varint()
        key = reader.sized()
        value = reader.sized()
        reader.pos = end  # (headers: coordinators write none)
        yield h.base_offset + offset_delta, key, value


def read_entries(data: bytes | memoryview, from_offset: int, below: int) -> tuple[list[Entry], int]:
    """The records and markers of the whole batches in ``data`` with offsets in
    [``from_offset``, ``below``), and the offset after the last batch read (where the next
    read starts; ``from_offset`` when none was)."""
    view = memoryview(data)
    out: list[Entry] = []
    pos, next_offset = 0, from_offset
    while pos + RECORD_BATCH_OVERHEAD <= len(view):
        h = header_at(view, pos)
        size = h.batch_length + LOG_OVERHEAD
        if pos + size > len(view):
            break
        end = last_offset(h)
        if end >= below:
            break
        batch = view[pos : pos + size]
        pos += size
        if end < next_offset:
            continue  # (a batch read before: the read started inside it)
        next_offset = end + 1
        if h.attributes & _CONTROL:
            if h.record_count == 0:  # (emptied by the log cleaner, kept for its producer epoch)
                continue
            committed = False
            for _, key, _value in _records(batch, h):
                if key is None or len(key) < _CONTROL_KEY.size:
                    raise CorruptCoordinatorRecord("control record without its key")
                committed = _CONTROL_KEY.unpack_from(key)[1] == COMMIT
            out.append(ControlMarker(h.base_offset, h.producer_id, h.producer_epoch, committed))
            continue
        for offset, key, value in _records(batch, h):
            if offset < from_offset:
                continue
            if key is None:
                raise CorruptCoordinatorRecord(f"record at offset {offset} has no key")
            out.append(DataRecord(offset, h.producer_id, h.producer_epoch, key, value))
    return out, next_offset
