"""The records inside one batch, decoded only as far as ListOffsets and a timestamp check need:
each record's offset and timestamp (Kafka's ``DefaultRecord``).

A record is ``length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
key | value | headers``; varints are zigzag-encoded. Only the first four fields are read, the
rest is skipped by ``length``. Records of an uncompressed batch are read in place; a gzip
batch is inflated with zlib (bounded). Snappy, lz4 and zstd need libraries the log does not
import, so for those the answer is at batch granularity: the batch's first offset (at or
above the log start) and its maxTimestamp, a superset a consumer seeking by time still reads
correctly from.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

from kmeta.log.record.batch import COMPRESSION_MASK, TIMESTAMP_TYPE_MASK, last_offset
from kmeta.protocol.records.record_batch import RECORD_BATCH_OVERHEAD, BatchHeader

_NONE, _GZIP = 0, 1
#: a gzip batch is inflated for a timestamp search only up to this (a zip bomb stays a bomb
#: on disk, not in the broker's memory): past it the answer is at batch granularity
MAX_INFLATED_BYTES = 64 * 1024 * 1024


class _Truncated(Exception):
    pass


def _varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise _Truncated
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def _records_region(batch: bytes | memoryview, h: BatchHeader) -> bytes | memoryview | None:
    body = memoryview(batch)[RECORD_BATCH_OVERHEAD : h.batch_length + 12]
    codec = h.attributes & COMPRESSION_MASK
    if codec == _NONE:
        return body
    if codec != _GZIP:
        return None
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # Kafka's gzip is GZIPOutputStream
    try:
        out = inflater.decompress(body, MAX_INFLATED_BYTES)
    except zlib.error:
        return None
    return None if inflater.unconsumed_tail else out


def record_timestamps(
    batch: bytes | memoryview, h: BatchHeader
) -> Iterator[tuple[int, int]] | None:
    """``(offset, timestamp)`` of each record in order, or None when the batch cannot be read
    record by record here (a codec the log does not decode, or bytes that do not parse)."""
    if h.attributes & TIMESTAMP_TYPE_MASK:  # LogAppendTime: every record has maxTimestamp
        return ((h.base_offset + i, h.max_timestamp) for i in range(h.last_offset_delta + 1))
    region = _records_region(batch, h)
    if region is None:
        return None
    try:
        return iter(list(_decode(region, h)))
    except (_Truncated, IndexError):
        return None


def _decode(region: bytes | memoryview, h: BatchHeader) -> Iterator[tuple[int, int]]:
    pos = 0
    for _ in range(h.record_count):
        length, pos = _varint(region, pos)
        end = pos + length
        if length < 3 or end > len(region):
            raise _Truncated
        ts_delta, p = _varint(region, pos + 1)  # (past the attributes byte)
        offset_delta, _ = _varint(region, p)
        yield h.base_offset + offset_delta, h.base_timestamp + ts_delta
        pos = end


def first_at_or_after(
    batch: bytes | memoryview, h: BatchHeader, target: int, start_offset: int
) -> tuple[int, int] | None:
    """``(offset, timestamp)`` of the first record with timestamp >= ``target`` and offset >=
    ``start_offset`` (Kafka's ``FileRecords.searchForTimestamp`` inside one batch)."""
    records = record_timestamps(batch, h)
    if records is None:  # batch granularity (module docstring)
        if h.max_timestamp >= target and last_offset(h) >= start_offset:
            return max(h.base_offset, start_offset), h.max_timestamp
        return None
    for offset, timestamp in records:
        if timestamp >= target and offset >= start_offset:
            return offset, timestamp
    return None


def timestamp_bounds(batch: bytes | memoryview, h: BatchHeader) -> tuple[int, int]:
    """The smallest and largest CreateTime timestamps of the batch's records (its base and
    max timestamps when they cannot be decoded here)."""
    records = record_timestamps(batch, h)
    if records is None:
        return min(h.base_timestamp, h.max_timestamp), h.max_timestamp
    stamps = [ts for _, ts in records]
    return (min(stamps), max(stamps)) if stamps else (h.base_timestamp, h.max_timestamp)
