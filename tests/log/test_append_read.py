"""Append and read: bytes kept as received, offsets and epochs set in place, reads bounded by
bytes and by the high watermark, bad input refused with nothing stored. Both storage modes."""

from __future__ import annotations

import struct

import pytest

from kmeta.log import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordTooLargeError,
)
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.records.record_batch import crc32c
from tests.log.conftest import Make
from tests.log.helpers import append_n, batch, everything, parse, sized


def test_round_trip_byte_for_byte_but_offset_and_epoch(make: Make) -> None:
    log = make()
    sent = [batch([b"a", b"b", b"c"]), batch([b"d"]), batch([b"e", b"f"], compression=1)]
    infos = [log.append_as_leader(b, 7, 5_000) for b in sent]
    assert [(i.first_offset, i.last_offset, i.record_count) for i in infos] == [
        (0, 2, 3),
        (3, 3, 1),
        (4, 5, 2),
    ]
    assert infos[1].size_in_bytes == len(sent[1])
    assert infos[0].log_append_time_ms == -1
    assert log.log_end_offset == 6
    stored = everything(log)
    assert len(stored) == sum(map(len, sent))
    pos = 0
    for b, info in zip(sent, infos, strict=True):
        got = stored[pos : pos + len(b)]
        # everything but baseOffset (0-7) and partitionLeaderEpoch (12-15) as the producer sent it
        assert got[8:12] == b[8:12]
        assert got[16:] == b[16:]
        assert struct.unpack_from(">q", got)[0] == info.first_offset
        assert struct.unpack_from(">i", got, 12)[0] == 7
        pos += len(b)
    batches = parse(stored)  # kafka-python validates each CRC
    assert [(x.base_offset, x.leader_epoch) for x in batches] == [(0, 7), (3, 7), (4, 7)]
    records = [r for x in batches for r in x]  # (a batch iterates once)
    assert [r.value for r in records] == [b"a", b"b", b"c", b"d", b"e", b"f"]
    assert [r.offset for r in records] == list(range(6))


def test_read_from_inside_a_batch_returns_the_whole_batch(make: Make) -> None:
    log = make()
    log.append_as_leader(batch([b"a", b"b", b"c"]), 0, 1)
    log.append_as_leader(batch([b"d"]), 0, 1)
    got = parse(log.read(1, 1 << 20, None).records)
    assert [x.base_offset for x in got] == [0, 3]
    assert [x.base_offset for x in parse(log.read(3, 1 << 20, None).records)] == [3]
    assert log.read(4, 1 << 20, None).records == b""


def test_max_bytes_whole_batches_and_min_one_batch(make: Make) -> None:
    log = make()
    for _ in range(10):
        log.append_as_leader(sized(100), 0, 1)
    assert len(log.read(0, 350, None).records) == 300  # whole batches only
    assert len(log.read(0, 399, None).records) == 300
    assert len(log.read(0, 400, None).records) == 400
    assert len(log.read(2, 10, None).records) == 100  # the first batch whole (minOneMessage)
    assert log.read(2, 10, None, min_one_batch=False).records == b""
    assert len(log.read(2, 100, None, min_one_batch=False).records) == 100
    assert len(log.read(0, -5, None).records) == 100
    assert len(log.read(0, 1 << 30, None).records) == 1000


def test_reads_bisect_a_sparse_index_over_many_batches(make: Make) -> None:
    log = make(index_interval_bytes=1000)
    values = [b"v%05d" % i for i in range(3000)]
    for i in range(0, 3000, 3):
        log.append_as_leader(batch(values[i : i + 3]), 0, 1)
    for offset in (0, 1, 2, 3, 1500, 1501, 2997, 2999):
        first = parse(log.read(offset, 1, None).records)
        assert len(first) == 1
        assert first[0].base_offset == offset - offset % 3
        assert [r.value for r in first[0]] == values[offset - offset % 3 : offset - offset % 3 + 3]
    chunk = parse(log.read(30, 20 * 85, None).records)
    assert chunk[0].base_offset == 30
    assert [x.base_offset for x in chunk] == list(range(30, 30 + 3 * len(chunk), 3))


def test_max_offset_caps_at_the_high_watermark(make: Make) -> None:
    log = make()
    for _ in range(5):
        log.append_as_leader(batch([b"a", b"b"]), 0, 1)  # offsets 0-1, 2-3, ... 8-9
    assert [x.base_offset for x in parse(log.read(0, 1 << 20, 6).records)] == [0, 2, 4]
    # a batch straddling max_offset is not a committed batch: it stays out (Kafka's maxPosition)
    assert [x.base_offset for x in parse(log.read(0, 1 << 20, 5).records)] == [0, 2]
    assert log.read(6, 1 << 20, 6).records == b""
    assert log.read(0, 1 << 20, 0).records == b""
    assert len(parse(log.read(0, 1 << 20, 10).records)) == 5


def test_out_of_range_fetches(make: Make) -> None:
    log = make()
    append_n(log, 3)
    assert log.read(3, 100, None).records == b""  # the log end: nothing yet, no error
    for offset in (4, -1, 1 << 40):
        with pytest.raises(OffsetOutOfRangeError) as caught:
            log.read(offset, 100, None)
        assert caught.value.error == ErrorCode.OFFSET_OUT_OF_RANGE


def test_high_watermark_is_clamped(make: Make) -> None:
    log = make()
    append_n(log, 4)
    assert log.high_watermark == 0
    assert log.update_high_watermark(3) is True
    assert log.high_watermark == 3
    assert log.update_high_watermark(3) is False
    assert log.update_high_watermark(99) is True
    assert log.high_watermark == 4
    assert log.last_stable_offset == 4


def _unchanged(log: PartitionLog, before: tuple[int, int, bytes]) -> None:
    assert (log.log_end_offset, log.size_in_bytes, everything(log)) == before


def _state(log: PartitionLog) -> tuple[int, int, bytes]:
    return log.log_end_offset, log.size_in_bytes, everything(log)


def test_bad_input_is_refused_with_nothing_stored(make: Make) -> None:
    log = make(max_message_bytes=500)
    append_n(log, 2)
    before = _state(log)
    good = batch([b"a", b"b"])
    crc_broken = bytearray(good)
    crc_broken[-1] ^= 0xFF
    not_from_zero = bytearray(good)
    struct.pack_into(">q", not_from_zero, 0, 5)
    count_wrong = bytearray(good)
    struct.pack_into(">i", count_wrong, 57, 3)
    struct.pack_into(">I", count_wrong, 17, crc32c(memoryview(count_wrong)[21:]))
    cases: list[tuple[bytes, type[Exception]]] = [
        (good[:40], InvalidRecordError),  # a truncated batch is no batch
        (b"", InvalidRecordError),
        (bytes(crc_broken), CorruptRecordError),
        (bytes(not_from_zero), InvalidRecordError),
        (bytes(count_wrong), InvalidRecordError),
        (good + good, InvalidRecordError),  # one batch per partition
        (sized(501), RecordTooLargeError),
        (good[:8] + struct.pack(">i", 5) + good[12:], CorruptRecordError),  # length below overhead
    ]
    for data, error in cases:
        with pytest.raises(error):
            log.append_as_leader(data, 0, 1)
        _unchanged(log, before)
    log.append_as_leader(sized(500), 0, 1)  # the limit itself is fine
    assert log.log_end_offset == 3


def test_log_append_time_rewrites_max_timestamp_and_crc(make: Make) -> None:
    log = make(message_timestamp_type="LogAppendTime")
    info = log.append_as_leader(batch([b"a", b"b"], timestamps=[5, 6]), 2, 1_234_567)
    assert info.log_append_time_ms == 1_234_567
    assert info.max_timestamp == 1_234_567
    (stored,) = parse(log.read(0, 1 << 20, None).records)  # CRC valid again
    assert stored.timestamp_type == 1
    assert stored.max_timestamp == 1_234_567
    assert [r.timestamp for r in stored] == [1_234_567, 1_234_567]


def test_timestamp_bounds_when_configured(make: Make) -> None:
    log = make(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=100)
    now = 1_000_000
    log.append_as_leader(batch([b"a", b"b"], timestamps=[now - 1000, now + 100]), 0, now)
    for stamps in ([now, now - 1001], [now + 101, now]):
        with pytest.raises(InvalidTimestampError) as caught:
            log.append_as_leader(batch([b"a", b"b"], timestamps=stamps), 0, now)
        assert caught.value.error == ErrorCode.INVALID_TIMESTAMP
    assert log.log_end_offset == 2
    unbounded = make()
    unbounded.append_as_leader(batch([b"a"], timestamps=[0]), 0, now)  # Kafka 3.9's defaults


def test_follower_appends_contiguous_batches(make: Make) -> None:
    leader, follower = make(), make()
    leader.append_as_leader(batch([b"a", b"b"]), 3, 1)
    leader.append_as_leader(batch([b"c"]), 4, 1)
    leader.append_as_leader(batch([b"d", b"e", b"f"]), 4, 1)
    fetched = bytes(leader.read(0, 1 << 20, None).records)
    info = follower.append_as_follower(fetched + fetched[:30])  # a trailing partial batch: ignored
    assert info is not None
    assert (info.first_offset, info.last_offset, info.record_count, info.size_in_bytes) == (
        0,
        5,
        6,
        len(fetched),
    )
    assert everything(follower) == fetched
    assert follower.latest_epoch == 4
    assert follower.end_offset_for_epoch(3) == (3, 2)
    assert follower.append_as_follower(b"") is None
    assert follower.append_as_follower(fetched[:40]) is None
    before = _state(follower)
    with pytest.raises(InvalidRecordError):  # not at the log end
        follower.append_as_follower(fetched)
    skipped = bytes(leader.read(3, 1 << 20, None).records)
    gapped = make()  # past the log end: a gap (a compacted leader has them), taken as Kafka does
    assert gapped.append_as_follower(skipped) is not None
    assert (gapped.log_end_offset, parse(gapped.read(0, 1 << 20, None).records)[0].base_offset) == (6, 3)
    with pytest.raises(InvalidRecordError):  # out of order within the fetched bytes
        make().append_as_follower(skipped + fetched)
    broken = bytearray(fetched)
    broken[len(fetched) - 1] ^= 1  # the last batch's CRC: the whole append is refused
    with pytest.raises(CorruptRecordError):
        make().append_as_follower(bytes(broken))
    _unchanged(follower, before)


def test_reads_of_a_rolled_memory_segment_are_views_that_stay_valid(make: Make, mode: str) -> None:
    log = make(segment_bytes=1000)
    for i in range(25):
        log.append_as_leader(sized(100, bytes([65 + i % 26])), 0, 1)
    old = log.read(0, 300, None).records  # in the first, rolled, segment
    active = log.read(20, 300, None).records
    assert type(active) is bytes
    if mode == "memory":
        assert isinstance(old, memoryview)  # zero-copy
    kept = bytes(old)
    log.append_as_leader(sized(100), 0, 1)  # the active segment grows; a view does not block it
    log.truncate_to(5)  # the rolled segment is cut (and active again): the view is untouched
    assert bytes(old) == kept
    assert [b.base_offset for b in parse(kept)] == [0, 1, 2]
    for _ in range(20):  # appends to the segment the view was taken from
        log.append_as_leader(sized(100), 0, 1)
    assert bytes(old) == kept
    log.update_high_watermark(log.log_end_offset)
    log.delete_records_before(log.log_end_offset)
    log.enforce_retention(1)
    assert bytes(old) == kept
