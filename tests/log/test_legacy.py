"""Produce v0-v2's message sets (format v0/v1), built by kafka-python's legacy encoder, stored
as one v2 batch as Kafka 3.x stores them: keys, values and v1 timestamps kept, offsets
assigned, CRC valid; what cannot be converted is refused with nothing stored."""

from __future__ import annotations

import warnings

import pytest

from kmeta.log import CorruptRecordError, InvalidRecordError, RecordTooLargeError
from tests.log.conftest import Make
from tests.log.helpers import GZIP, SNAPPY, everything, parse

with warnings.catch_warnings():  # kafka-python uses importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.legacy_records import LegacyRecordBatchBuilder


def legacy(
    magic: int, records: list[tuple[int, bytes | None, bytes | None]], compression: int = 0
) -> bytes:
    builder = LegacyRecordBatchBuilder(
        magic=magic, compression_type=compression, batch_size=1 << 20
    )
    for i, (ts, key, value) in enumerate(records):
        builder.append(i, timestamp=ts if magic else None, key=key, value=value)
    return bytes(builder.build())


RECORDS = [(1000, None, b"one"), (3000, b"k2", b"two"), (2000, b"k3", None)]


@pytest.mark.parametrize(
    ("magic", "compression"), [(0, 0), (1, 0), (1, GZIP), (0, GZIP), (1, SNAPPY)]
)
def test_message_sets_stored_as_one_v2_batch(make: Make, magic: int, compression: int) -> None:
    log = make()
    log.append_as_leader(legacy(1, [(5, None, b"first")]), 0, 1)  # offset 0
    info = log.append_as_leader(legacy(magic, RECORDS, compression), 4, 9_999)
    assert (info.first_offset, info.last_offset, info.record_count) == (1, 3, 3)
    stored = parse(everything(log))  # kafka-python reads them back, CRC checked
    assert [(b.magic, b.base_offset, b.leader_epoch) for b in stored] == [(2, 0, 0), (2, 1, 4)]
    records = list(stored[1])
    assert [(r.offset, r.key, r.value) for r in records] == [
        (1, None, b"one"),
        (2, b"k2", b"two"),
        (3, b"k3", None),
    ]
    if magic == 1:
        assert [r.timestamp for r in records] == [1000, 3000, 2000]
        assert info.max_timestamp == 3000
        # exact per record, but for codecs the log does not decompress (snappy: the codec is
        # kept, compression.type=producer): the batch's base offset
        exact = compression != SNAPPY
        assert log.offset_for_timestamp(1500) == (2 if exact else 1, 3000, 4)
    else:  # format v0 has no timestamps
        assert [r.timestamp for r in records] == [-1, -1, -1]


def test_log_append_time_topic(make: Make) -> None:
    log = make(message_timestamp_type="LogAppendTime")
    info = log.append_as_leader(legacy(1, RECORDS, GZIP), 0, 7_777)
    assert info.log_append_time_ms == 7_777
    (stored,) = parse(everything(log))
    assert [r.timestamp for r in stored] == [7_777] * 3


def test_what_cannot_be_converted_is_refused(make: Make) -> None:
    log = make(max_message_bytes=2000)
    good = legacy(1, RECORDS)
    broken = bytearray(good)
    broken[30] ^= 0xFF
    cases: list[tuple[bytes, type[Exception]]] = [
        (bytes(broken), CorruptRecordError),
        (good[:20], InvalidRecordError),
        (legacy(1, [(1, None, b"x" * 700)] * 3), RecordTooLargeError),  # 3 small, one big v2 batch
    ]
    for data, error in cases:
        with pytest.raises(error):
            log.append_as_leader(data, 0, 1)
        assert log.log_end_offset == 0
        assert log.size_in_bytes == 0
