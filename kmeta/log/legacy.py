"""Message sets of format v0/v1 (Produce v0-v2, old clients) up-converted to one v2 batch, as
Kafka 3.x stores them (``LogValidator.convertAndAssignOffsetsNonCompressed`` /
``...Compressed``): the log keeps only magic 2.

A legacy entry is ``offset int64 | size int32 | crc uint32 | magic int8 | attributes int8 |
[timestamp int64, v1] | key bytes | value bytes`` (bytes: int32 length, -1 null). A compressed
entry wraps a message set in its value; gzip (zlib) is unwrapped here, snappy and lz4 are not
(the log imports no codec library: INVALID_RECORD). Records keep their keys, values and (v1)
timestamps: a v0 record has none (-1), a v1 wrapper marked LogAppendTime gives its own to the
records inside. The v2 batch is uncompressed, with no producer id, base offset 0.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from kmeta.log.batch import NO_TIMESTAMP, TIMESTAMP_TYPE_MASK
from kmeta.log.errors import CorruptRecordError, InvalidRecordError
from kmeta.protocol.record_batch import LOG_OVERHEAD, crc32c

_GZIP = 1
_MAX_INFLATED = 64 * 1024 * 1024
Record = tuple[int, bytes | None, bytes | None]  # timestamp, key, value


def _bytes(data: memoryview, pos: int) -> tuple[bytes | None, int]:
    (n,) = struct.unpack_from(">i", data, pos)
    if n < 0:
        return None, pos + 4
    if pos + 4 + n > len(data):
        raise CorruptRecordError("A legacy record's key or value runs past its end")
    return bytes(data[pos + 4 : pos + 4 + n]), pos + 4 + n


def _records(data: memoryview, outer_ts: int | None = None, depth: int = 0) -> Iterator[Record]:
    pos = 0
    while len(data) - pos >= LOG_OVERHEAD:
        (size,) = struct.unpack_from(">i", data, pos + 8)
        body = data[pos + LOG_OVERHEAD : pos + LOG_OVERHEAD + size]
        pos += LOG_OVERHEAD + size
        if len(body) < size or size < 14:
            break  # a trailing partial entry is no entry
        magic, attributes = body[4], body[5]
        at = 6
        timestamp = NO_TIMESTAMP
        if magic == 1:
            (timestamp,) = struct.unpack_from(">q", body, 6)
            at = 14
        if outer_ts is not None:
            timestamp = outer_ts
        key, at = _bytes(body, at)
        value, at = _bytes(body, at)
        codec = attributes & 0x07
        if not codec:
            yield timestamp, key, value
            continue
        if depth or codec != _GZIP or value is None:
            raise InvalidRecordError(
                f"Legacy compression codec {codec} cannot be up-converted here"
            )
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            inner = inflater.decompress(value, _MAX_INFLATED)
        except zlib.error as exc:
            raise CorruptRecordError(f"A gzip legacy message does not inflate: {exc}") from exc
        if inflater.unconsumed_tail:
            raise InvalidRecordError("A gzip legacy message inflates past 64 MiB")
        own = timestamp if magic == 1 and attributes & TIMESTAMP_TYPE_MASK else None
        yield from _records(memoryview(inner), own, depth + 1)


def _varint(value: int) -> bytes:
    v = (value << 1) ^ (value >> 63)  # zigzag
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _field(data: bytes | None) -> bytes:
    return _varint(-1) if data is None else _varint(len(data)) + data


def up_convert(message_set: bytes) -> bytes:
    """One v2 batch holding every record of a checked v0/v1 message set."""
    records = list(_records(memoryview(message_set)))
    if not records:
        raise InvalidRecordError("A produce request must have at least one record")
    stamps = [ts for ts, _, _ in records]
    base_ts = stamps[0]
    body = bytearray()
    for i, (ts, key, value) in enumerate(records):
        record = b"\0" + _varint(ts - base_ts) + _varint(i) + _field(key) + _field(value) + b"\0"
        body += _varint(len(record)) + record
    count = len(records)
    after_crc = (
        struct.pack(">hiqqqhii", 0, count - 1, base_ts, max(stamps), -1, -1, -1, count) + body
    )
    crc = crc32c(after_crc)
    head = struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc)
    return head + after_crc
