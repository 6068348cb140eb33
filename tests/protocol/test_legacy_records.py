"""Legacy message sets up-converted to v2: encoded by kafka-python's own legacy builder, read
back by kafka-python's v2 reader (both independent of kmeta), and the refusals Kafka makes."""

from __future__ import annotations

import gzip
import struct
import warnings
import zlib

import lz4.frame
import pytest

with warnings.catch_warnings():  # kafka-python 3.0.12 reads its schemas with read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.records.legacy_records import check_old_produce_records, up_convert, xxh32
from kmeta.protocol.records.record_batch import crc32c

NONE, GZIP, SNAPPY, LZ4 = 0, 1, 2, 3



def _gzip(data: bytes) -> bytes:
    """gzip without a time in its header: the parametrized cases' ids are the same bytes in
    every process (pytest-xdist's workers must collect the same tests)."""
    return gzip.compress(data, mtime=0)

def legacy_set(magic: int, codec: int, n: int = 5, base_ts: int = 1_700_000_000_000) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i in range(n):
        key = b"k%d" % i if i % 2 else None
        builder.append(i, base_ts + i if magic else None, key, b"v%d-" % i + b"x" * i * 50)
    return bytes(builder.build())


def entry(magic: int, value: bytes | None, attributes: int = 0, ts: int = 5, key: bytes | None = None,
          offset: int = 0) -> bytes:  # fmt: skip
    def sized(b: bytes | None) -> bytes:
        return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b

    body = (
        bytes([magic, attributes])
        + (struct.pack(">q", ts) if magic else b"")
        + sized(key)
        + sized(value)
    )
    body = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(body)) + body


def read_v2(
    records: bytes,
) -> tuple[DefaultRecordBatch, list[tuple[int, int, bytes | None, bytes | None]]]:
    batch = DefaultRecordBatch(records)
    assert batch.validate_crc()
    return batch, [(r.offset, r.timestamp, r.key, r.value) for r in batch]


@pytest.mark.parametrize(
    ("magic", "codec"),
    [(0, NONE), (0, GZIP), (0, SNAPPY), (1, NONE), (1, GZIP), (1, SNAPPY), (1, LZ4)],
)
def test_kafka_python_legacy_sets_become_one_v2_batch_with_every_record(
    magic: int, codec: int
) -> None:
    data = legacy_set(magic, codec)
    out = up_convert(data)
    assert out.error == ErrorCode.NONE
    assert out.record_count == 5
    batch, records = read_v2(out.records)
    assert batch.base_offset == 0
    assert batch.compression_type == codec
    assert batch.producer_id == -1
    assert batch.timestamp_type == 0
    for i, (offset, ts, key, value) in enumerate(records):
        assert offset == i
        assert ts == (1_700_000_000_000 + i if magic else -1)
        assert key == (b"k%d" % i if i % 2 else None)
        assert value == b"v%d-" % i + b"x" * i * 50
    assert batch.max_timestamp == (1_700_000_000_004 if magic else -1)


def test_a_v0_lz4_wrapper_with_kafka_3160s_header_checksum_is_read() -> None:
    inner = entry(0, b"a") + entry(0, b"b", offset=1)
    frame = bytearray(lz4.frame.compress(inner, store_size=False, content_checksum=False))
    assert frame[6] == (xxh32(bytes(frame[4:6])) >> 8) & 0xFF  # (the right checksum)
    frame[6] = (xxh32(bytes(frame[0:6])) >> 8) & 0xFF  # the old producers' wrong one
    out = up_convert(entry(0, bytes(frame), attributes=LZ4))
    assert out.error == ErrorCode.NONE
    assert [r[3] for r in read_v2(out.records)[1]] == [b"a", b"b"]


def test_xxh32_matches_its_reference_vectors() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF


def test_a_v1_log_append_time_wrapper_gives_its_timestamp_to_the_inner_records() -> None:
    inner = entry(1, b"a", ts=1) + entry(1, b"b", ts=2, offset=1)
    out = up_convert(entry(1, _gzip(inner), attributes=GZIP | 0x08, ts=777))
    assert [r[1] for r in read_v2(out.records)[1]] == [777, 777]


def test_a_trailing_partial_entry_is_no_entry() -> None:
    data = legacy_set(1, NONE, n=3)
    out = up_convert(data + data[:20])
    assert out.error == ErrorCode.NONE
    assert out.record_count == 3


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"", ErrorCode.INVALID_RECORD),
        (struct.pack(">qi", 0, 3) + b"\x00" * 3, ErrorCode.CORRUPT_MESSAGE),  # size below 14
        (entry(0, b"a") + entry(1, b"b"), ErrorCode.INVALID_RECORD),  # mixed magic
        (
            entry(1, _gzip(entry(1, b"a")), attributes=GZIP) + entry(1, b"b"),
            ErrorCode.INVALID_RECORD,
        ),
        (entry(1, b"not gzip at all", attributes=GZIP), ErrorCode.UNKNOWN_SERVER_ERROR),
        (entry(1, None, attributes=GZIP), ErrorCode.INVALID_RECORD),  # null wrapper value
        (
            entry(1, _gzip(b""), attributes=GZIP),
            ErrorCode.INVALID_RECORD,
        ),  # no inner records
        (entry(1, b"zstd?", attributes=4), ErrorCode.INVALID_RECORD),
        (
            entry(1, _gzip(entry(0, b"a")), attributes=GZIP),
            ErrorCode.INVALID_RECORD,
        ),  # inner magic
        (
            entry(1, _gzip(entry(1, b"a", attributes=GZIP)), attributes=GZIP),
            ErrorCode.INVALID_RECORD,
        ),
        (
            entry(1, _gzip(entry(1, b"a")[:-1] + b"!"), attributes=GZIP),
            ErrorCode.CORRUPT_MESSAGE,
        ),
        (entry(3, b"a"), ErrorCode.CORRUPT_MESSAGE),  # (no such legacy magic)
    ],
)
def test_refusals_carry_kafkas_error_codes(data: bytes, error: ErrorCode) -> None:
    assert up_convert(data).error == error


def test_a_v2_batch_after_legacy_entries_is_a_magic_mismatch() -> None:
    v2 = up_convert(legacy_set(1, NONE, n=1)).records
    assert up_convert(legacy_set(1, NONE, n=2) + v2).error == ErrorCode.INVALID_RECORD


def test_an_entry_over_max_message_bytes_is_message_too_large() -> None:
    data = legacy_set(1, NONE, n=3)  # (entries of 40-150 bytes)
    assert up_convert(data, max_message_bytes=100).error == ErrorCode.MESSAGE_TOO_LARGE
    assert up_convert(data, max_message_bytes=1000).error == ErrorCode.NONE


def test_a_broken_crc_is_corrupt_message() -> None:
    data = bytearray(legacy_set(1, NONE, n=2))
    data[-1] ^= 0xFF
    out = up_convert(bytes(data))
    assert out.error == ErrorCode.CORRUPT_MESSAGE
    assert out.records == b""


def test_old_produce_records_convert_legacy_sets_and_check_v2_batches() -> None:
    checked, converted = check_old_produce_records(legacy_set(0, GZIP, n=4), 1 << 20)
    assert checked.error == ErrorCode.NONE
    assert checked.record_count == 4
    assert converted is not None
    assert len(read_v2(converted)[1]) == 4
    v2 = up_convert(legacy_set(1, NONE, n=2)).records
    checked, converted = check_old_produce_records(v2, 1 << 20)
    assert (checked.error, checked.record_count, converted) == (ErrorCode.NONE, 2, v2)
    assert check_old_produce_records(v2 + v2, 1 << 20)[0].error == ErrorCode.INVALID_RECORD
    zstd = bytearray(v2)  # (a zstd attribute: no version rule before v3)
    zstd[22] |= 4
    zstd[17:21] = struct.pack(">I", crc32c(bytes(zstd[21:])))
    assert check_old_produce_records(bytes(zstd), 1 << 20)[0].error == ErrorCode.NONE
    assert check_old_produce_records(None, 1 << 20)[0].error == ErrorCode.INVALID_RECORD
    too_big = check_old_produce_records(legacy_set(1, NONE, n=3), 100)[0]
    assert too_big.error == ErrorCode.MESSAGE_TOO_LARGE
