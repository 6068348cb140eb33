"""Legacy message sets (formats v0 and v1) up-converted to one v2 record batch, as Kafka 3.x does.

Old producers (Produce v0-v2, and librdkafka before it sees Fetch v4) send message sets of the
formats before KIP-98. A Kafka 3.x broker stores message format v2 only, so its
``LogValidator`` converts such a set on append (``convertAndAssignOffsetsNonCompressed`` for
an uncompressed set, ``buildRecordsAndAssignOffsets`` for a compressed wrapper). This module is
that conversion, a pure function: :func:`up_convert` takes one partition's message set and
answers one v2 batch (base offset 0, partition leader epoch -1: the log sets both) or the
error Kafka would answer.

A legacy entry is ``offset int64 | size int32 | crc uint32 | magic int8 | attributes int8 |
[timestamp int64 (v1)] | key bytes | value bytes``, the CRC-32 (not C) over magic to the end.
What Kafka does, and so what happens here:

* Every entry fits max.message.bytes (MESSAGE_TOO_LARGE) and is CRC-checked
  (CORRUPT_MESSAGE); all entries carry the first one's magic (else INVALID_RECORD,
  ``validateBatch``).
* Uncompressed: every entry is one record; v0 records have no timestamp (-1), v1 records keep
  theirs. The batch is uncompressed.
* Compressed (gzip, snappy, lz4): exactly one wrapper entry (INVALID_RECORD "Compressed outer
  record has more than one batch"); its value is the inner message set, each inner message
  CRC-checked (CORRUPT_MESSAGE), of the wrapper's magic and uncompressed (INVALID_RECORD); a
  v1 wrapper with LogAppendTime gives its timestamp to every inner record. zstd, or a codec id
  above 4, cannot be in a legacy set (INVALID_RECORD). The batch is compressed with the
  source's codec again (``compression.type=producer``, Kafka's default). A value that does not
  decompress is a ``KafkaException`` in Kafka, answered UNKNOWN_SERVER_ERROR: so here too.
* Snappy in legacy sets is xerial-framed (or one raw block, which xerial's stream also reads);
  lz4 is an LZ4 frame, whose v0 flavour carries the wrong header checksum of KAFKA-3160
  (Kafka reads v0 ignoring it: here it is recomputed before the frame is read).
* Timestamp type of the new batch: CreateTime; the log applies the topic's LogAppendTime.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Callable
from typing import NamedTuple

from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.records.record_batch import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_V2,
    RECORD_OVERHEAD_V0,
    RecordBytes,
    RecordsChecked,
    check_produce_records,
    crc32c,
)

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
_LOG_APPEND_TIME = 0x08
#: crc, magic, attributes (+ timestamp for v1): the fixed part before the key
_FIXED = {0: 6, 1: 14}
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_BLOCK = 32 * 1024  # (xerial SnappyOutputStream's default block size, as Kafka uses it)
_LZ4_MAGIC = b"\x04\x22\x4d\x18"


class UpConverted(NamedTuple):
    """One v2 batch and its record count, or the error (and why)."""

    error: ErrorCode
    message: str | None = None
    records: bytes = b""
    record_count: int = 0


class Record(NamedTuple):
    timestamp: int
    key: bytes | None
    value: bytes | None


class _Entry(NamedTuple):
    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None


class _Refused(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


def _entries(data: bytes | memoryview, max_message_bytes: int | None = None) -> list[_Entry]:
    """The whole entries of a message set (a trailing partial entry is none, as Kafka's
    ``ByteBufferLogInputStream``), each within ``max_message_bytes`` (MESSAGE_TOO_LARGE) and
    CRC-checked, in ``UnifiedLog.analyzeAndValidateRecords``' order. A v2 batch among them is
    kept as a bare magic 2 for the magic check that follows (it is not converted)."""
    out: list[_Entry] = []
    pos = 0
    view = memoryview(data)
    while len(view) - pos >= LOG_OVERHEAD:
        offset, size = struct.unpack_from(">qi", view, pos)
        if size < RECORD_OVERHEAD_V0:
            raise _Refused(
                ErrorCode.CORRUPT_MESSAGE,
                f"Record size {size} is less than the minimum record overhead ({RECORD_OVERHEAD_V0})",
            )
        if len(view) - pos < LOG_OVERHEAD + size:
            break
        if max_message_bytes is not None and LOG_OVERHEAD + size > max_message_bytes:
            raise _Refused(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"The record size is {LOG_OVERHEAD + size} bytes which exceeds the maximum "
                f"configured value of {max_message_bytes}.",
            )
        body = view[pos + LOG_OVERHEAD : pos + LOG_OVERHEAD + size]
        out.append(_Entry(offset, 2, 0, -1, None, None) if body[4] == 2 else _entry(offset, body))
        pos += LOG_OVERHEAD + size
    return out


def _entry(offset: int, body: memoryview) -> _Entry:
    (crc,) = struct.unpack_from(">I", body, 0)
    magic, attributes = body[4], body[5]
    if magic not in _FIXED or len(body) < _FIXED[magic] + 8:
        raise _Refused(
            ErrorCode.CORRUPT_MESSAGE,
            f"Invalid magic or size of a legacy record: {magic}, {len(body)}",
        )
    if zlib.crc32(body[4:]) != crc:
        raise _Refused(ErrorCode.CORRUPT_MESSAGE, f"Record is corrupt (stored crc = {crc})")
    timestamp = struct.unpack_from(">q", body, 6)[0] if magic == 1 else -1
    pos = _FIXED[magic]
    key, pos = _bytes(body, pos)
    value, _ = _bytes(body, pos)  # (bytes after the value: covered by the CRC, ignored as Kafka)
    return _Entry(offset, magic, attributes, timestamp, key, value)


def _bytes(body: memoryview, pos: int) -> tuple[bytes | None, int]:
    if len(body) - pos < 4:
        raise _Refused(ErrorCode.CORRUPT_MESSAGE, "Record is corrupt (truncated key or value)")
    (length,) = struct.unpack_from(">i", body, pos)
    pos += 4
    if length < 0:
        return None, pos
    if len(body) - pos < length:
        raise _Refused(ErrorCode.CORRUPT_MESSAGE, "Record is corrupt (truncated key or value)")
    return bytes(body[pos : pos + length]), pos + length


def up_convert(data: bytes | memoryview, max_message_bytes: int | None = None) -> UpConverted:
    """One partition's legacy message set as one v2 batch (see the module's docstring);
    ``max_message_bytes``: the topic's max.message.bytes, which each entry must fit (the
    batch it becomes is checked against it again by the log)."""
    try:
        entries = _entries(data, max_message_bytes)
        if not entries:
            raise _Refused(
                ErrorCode.INVALID_RECORD, "A produce request must have at least one record"
            )
        first = entries[0]
        for entry in entries[1:]:
            if entry.magic != first.magic:
                raise _Refused(
                    ErrorCode.INVALID_RECORD,
                    f"Batch magic {entry.magic} is not the same as the first batch's magic byte {first.magic}",
                )
        codec = first.attributes & 0x07
        if codec == 0:
            records = [Record(e.timestamp, e.key, e.value) for e in entries]
        else:
            if len(entries) > 1:
                raise _Refused(
                    ErrorCode.INVALID_RECORD, "Compressed outer record has more than one batch"
                )
            records = _inner_records(first, codec)
    except _Refused as refused:
        return UpConverted(refused.error, str(refused))
    return UpConverted(ErrorCode.NONE, None, build_v2_batch(records, codec), len(records))


def _inner_records(wrapper: _Entry, codec: int) -> list[Record]:
    if codec >= ZSTD:  # (AbstractLegacyRecordBatch's deep iterator; ids above 4 are unknown)
        raise _Refused(
            ErrorCode.INVALID_RECORD,
            f"Invalid wrapper compressionType found in legacy deep record iterator {wrapper.magic}",
        )
    if wrapper.value is None:
        raise _Refused(
            ErrorCode.INVALID_RECORD,
            f"Found invalid compressed record set with null value (magic = {wrapper.magic})",
        )
    try:
        inner_set = _DECOMPRESS[codec](wrapper.value, wrapper.magic)
    except Exception as exc:  # (any codec's failure: Kafka's KafkaException)
        raise _Refused(
            ErrorCode.UNKNOWN_SERVER_ERROR, f"Cannot decompress the wrapper's value: {exc}"
        ) from exc
    inner = _entries(inner_set)
    if not inner:
        raise _Refused(
            ErrorCode.INVALID_RECORD, "Found invalid compressed record set with no inner records"
        )
    appended = wrapper.magic == 1 and wrapper.attributes & _LOG_APPEND_TIME
    records = []
    for entry in inner:
        if entry.magic != wrapper.magic:
            raise _Refused(
                ErrorCode.INVALID_RECORD,
                f"Compressed message magic {entry.magic} does not match wrapper magic {wrapper.magic}",
            )
        if entry.attributes & 0x07:
            raise _Refused(ErrorCode.INVALID_RECORD, "Inner messages must not be compressed")
        timestamp = wrapper.timestamp if appended else entry.timestamp
        records.append(Record(timestamp, entry.key, entry.value))
    return records


# -- codecs ---------------------------------------------------------------------------------


def _gunzip(value: bytes, magic: int) -> bytes:
    return gzip.decompress(value)


def _unsnappy(value: bytes, magic: int) -> bytes:
    import snappy  # (python-snappy; imported on first use: only legacy snappy sets need it)

    if not value.startswith(_XERIAL_MAGIC):
        return bytes(snappy.uncompress(value))  # one raw block, as xerial's stream reads it
    out, pos = bytearray(), 16  # (magic, version int32, compatible version int32)
    while pos < len(value):
        (length,) = struct.unpack_from(">i", value, pos)
        if length < 0 or pos + 4 + length > len(value):
            raise ValueError("truncated xerial snappy block")
        out += snappy.uncompress(value[pos + 4 : pos + 4 + length])
        pos += 4 + length
    return bytes(out)


def _unlz4(value: bytes, magic: int) -> bytes:
    import lz4.frame

    if magic == 0 and value.startswith(_LZ4_MAGIC) and len(value) >= 7:
        # KAFKA-3160: v0 producers hashed the magic into the header checksum; Kafka ignores it
        flg = value[4]
        end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
        if len(value) > end:
            hc = (xxh32(value[4:end]) >> 8) & 0xFF
            value = value[:end] + bytes([hc]) + value[end + 1 :]
    return bytes(lz4.frame.decompress(value))


_DECOMPRESS: dict[int, Callable[[bytes, int], bytes]] = {
    GZIP: _gunzip,
    SNAPPY: _unsnappy,
    LZ4: _unlz4,
}


def _compress(codec: int, raw: bytes) -> bytes:
    """The records section of a v2 batch compressed as Kafka's v2 writers do."""
    if codec == GZIP:
        return gzip.compress(raw, mtime=0)  # (as GZIPOutputStream: no time in the header)
    if codec == SNAPPY:
        import snappy

        out = bytearray(_XERIAL_MAGIC + struct.pack(">ii", 1, 1))
        for start in range(0, len(raw), _XERIAL_BLOCK):
            block = snappy.compress(raw[start : start + _XERIAL_BLOCK])
            out += struct.pack(">i", len(block)) + block
        return bytes(out)
    import lz4.frame

    # (KafkaLZ4BlockOutputStream: 64 KiB independent blocks, no content size or checksum)
    return bytes(
        lz4.frame.compress(
            raw,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    )


_PRIME1, _PRIME2, _PRIME3, _PRIME4, _PRIME5 = (
    2654435761, 2246822519, 3266489917, 668265263, 374761393,
)  # fmt: skip
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32, for the LZ4 frame header checksum (a few bytes: pure Python is plenty)."""
    n, pos = len(data), 0
    if n >= 16:
        v = [
            (seed + _PRIME1 + _PRIME2) & _M32, (seed + _PRIME2) & _M32, seed, (seed - _PRIME1) & _M32,
        ]  # fmt: skip
        while pos + 16 <= n:
            for i in range(4):
                lane = int.from_bytes(data[pos : pos + 4], "little")
                v[i] = (_rotl((v[i] + lane * _PRIME2) & _M32, 13) * _PRIME1) & _M32
                pos += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _PRIME5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        h = (h + int.from_bytes(data[pos : pos + 4], "little") * _PRIME3) & _M32
        h = (_rotl(h, 17) * _PRIME4) & _M32
        pos += 4
    while pos < n:
        h = (h + data[pos] * _PRIME5) & _M32
        h = (_rotl(h, 11) * _PRIME1) & _M32
        pos += 1
    h = ((h ^ (h >> 15)) * _PRIME2) & _M32
    h = ((h ^ (h >> 13)) * _PRIME3) & _M32
    return h ^ (h >> 16)


# -- the v2 batch ---------------------------------------------------------------------------


_SMALL = tuple(bytes([i]) for i in range(0x80))
_INT64 = 1 << 64


def _zigzag(value: int) -> bytes:
    """A zigzag varint (varlong) of an int64: most values here take one or two bytes."""
    v = (value << 1) ^ (value >> 63)
    if v < 0x80:
        return _SMALL[v]
    if v < 0x4000:
        return bytes(((v & 0x7F) | 0x80, v >> 7))
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _sized(value: bytes | None) -> bytes:
    return b"\x01" if value is None else _zigzag(len(value)) + value  # (-1: null)


def build_v2_batch(records: list[Record], codec: int = 0) -> bytes:
    """A v2 batch of ``records`` (offsets 0..n-1, no producer id, CreateTime), as Kafka's
    ``MemoryRecordsBuilder`` writes it: base timestamp = the first record's, max = the largest;
    a timestamp delta wraps as Java's long subtraction does (the reader adds it back alike)."""
    base_ts = records[0].timestamp
    parts: list[bytes] = []
    for delta, record in enumerate(records):
        ts_delta = (record.timestamp - base_ts + (1 << 63)) % _INT64 - (1 << 63)
        inner = b"".join(
            (
                b"\x00",
                _zigzag(ts_delta),
                _zigzag(delta),
                _sized(record.key),
                _sized(record.value),
                b"\x00",
            )
        )
        parts.append(_zigzag(len(inner)))
        parts.append(inner)
    body = b"".join(parts)
    payload = _compress(codec, body) if codec else body
    max_ts = max(r.timestamp for r in records)
    after_crc = struct.pack(
        ">hiqqqhii", codec, len(records) - 1, base_ts, max_ts, -1, -1, -1, len(records)
    ) + payload  # fmt: skip
    length = 4 + 1 + 4 + len(after_crc)  # (partition leader epoch, magic, crc, the rest)
    return struct.pack(">qiibI", 0, length, -1, 2, crc32c(after_crc)) + after_crc


def check_old_produce_records(
    records: RecordBytes | None, max_message_bytes: int
) -> tuple[RecordsChecked, RecordBytes | None]:
    """Produce v0-v2's records for one partition, as Kafka 3.x appends them: the check and
    the records to append (a legacy set's up-converted batch, else the records as sent).

    ``ProduceRequest.validateRecords`` checks nothing before v3 (old clients sent the wrong
    magic for the version, and brokers took it), so only the log's checks apply: a legacy set
    is up-converted (:func:`up_convert`) and the batch it becomes checked as a client's batch
    (its size against max.message.bytes); a v2 batch is checked as the log checks a client's,
    one batch only, any codec (no zstd rule for these versions)."""
    data = records or b""
    if len(data) > HEADER_SIZE_UP_TO_MAGIC - 1 and data[HEADER_SIZE_UP_TO_MAGIC - 1] < MAGIC_V2:
        converted = up_convert(data, max_message_bytes)
        if converted.error != ErrorCode.NONE:
            return RecordsChecked(converted.error, converted.message), None
        return check_produce_records(3, converted.records, max_message_bytes), converted.records
    # (7: the first version whose zstd rule lets every codec through)
    return check_produce_records(7, data, max_message_bytes, legacy=False), records
