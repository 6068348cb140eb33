"""ListOffsets on a log: exact per record for uncompressed and gzip batches (record timestamps
decoded from their deltas), batch granularity for snappy; the special targets; records below
the log start skipped. Batches built by kafka-python's encoder. Both storage modes."""

from __future__ import annotations

import random

from kmeta.log import PartitionLog
from kmeta.log.list_offsets import MAX_TIMESTAMP
from tests.log.conftest import Make
from tests.log.helpers import GZIP, SNAPPY, batch, everything, parse


def _oracle(log: PartitionLog, target: int) -> tuple[int, int, int] | None:
    """The first record at or after ``target`` from the log start, as kafka-python reads the
    stored bytes record by record."""
    for b in parse(everything(log)):
        for r in b:
            if r.timestamp >= target and r.offset >= log.log_start_offset:
                return r.offset, r.timestamp, b.leader_epoch
    return None


def test_exact_per_record_inside_a_batch(make: Make) -> None:
    log = make()
    log.append_as_leader(batch([b"a", b"b", b"c", b"d"], timestamps=[100, 300, 200, 400]), 1, 1)
    log.append_as_leader(batch([b"e", b"f"], timestamps=[500, 450]), 2, 1)
    assert log.offset_for_timestamp(0) == (0, 100, 1)
    assert log.offset_for_timestamp(101) == (1, 300, 1)  # not the batch's base offset
    assert log.offset_for_timestamp(250) == (1, 300, 1)
    assert log.offset_for_timestamp(301) == (3, 400, 1)
    assert log.offset_for_timestamp(401) == (4, 500, 2)
    assert log.offset_for_timestamp(460) == (4, 500, 2)
    assert log.offset_for_timestamp(501) is None
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == (4, 500, 2)


def test_gzip_batches_are_exact_too(make: Make) -> None:
    log = make()
    log.append_as_leader(
        batch([b"x" * 50] * 4, timestamps=[10, 40, 20, 30], compression=GZIP), 0, 1
    )
    assert parse(everything(log))[0].compression_type == GZIP  # (the encoder compressed it)
    assert log.offset_for_timestamp(11) == (1, 40, 0)
    assert log.offset_for_timestamp(21) == (1, 40, 0)
    assert log.offset_for_timestamp(41) is None
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == (1, 40, 0)


def test_snappy_batches_answer_at_batch_granularity(make: Make) -> None:
    log = make()
    log.append_as_leader(batch([b"a", b"b"], timestamps=[10, 20]), 0, 1)
    values = [b"c" * 200, b"d" * 200, b"e" * 200]
    log.append_as_leader(batch(values, timestamps=[30, 50, 40], compression=SNAPPY), 0, 1)
    assert parse(everything(log))[1].compression_type == SNAPPY
    assert log.offset_for_timestamp(15) == (1, 20, 0)
    # inside the snappy batch: its first offset and its max timestamp (documented)
    assert log.offset_for_timestamp(45) == (2, 50, 0)
    assert log.offset_for_timestamp(51) is None


def test_log_append_time_batches(make: Make) -> None:
    log = make(message_timestamp_type="LogAppendTime")
    log.append_as_leader(batch([b"a", b"b"], timestamps=[1, 2]), 0, 1000)
    log.append_as_leader(batch([b"c"], timestamps=[3]), 0, 2000)
    assert log.offset_for_timestamp(1) == (0, 1000, 0)
    assert log.offset_for_timestamp(1001) == (2, 2000, 0)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == (2, 2000, 0)


def test_records_below_the_log_start_are_skipped(make: Make) -> None:
    log = make()
    log.append_as_leader(batch([b"a", b"b", b"c"], timestamps=[10, 20, 30]), 0, 1)
    log.update_high_watermark(3)
    log.delete_records_before(2)
    assert log.offset_for_timestamp(0) == (2, 30, 0)
    assert log.offset_for_timestamp(-2) == (2, -1, 0)


def test_empty_log(make: Make) -> None:
    log = make()
    assert log.offset_for_timestamp(0) is None
    assert log.offset_for_timestamp(MAX_TIMESTAMP) is None
    assert log.offset_for_timestamp(-2) == (0, -1, -1)
    assert log.offset_for_timestamp(-7) is None


def test_matches_a_record_by_record_search_across_segments(make: Make) -> None:
    rng = random.Random(28)
    log = make(segment_bytes=2000, index_interval_bytes=300)
    for n in range(120):
        count = rng.randint(1, 6)
        stamps = [rng.randint(0, 5000) for _ in range(count)]
        gzip = n % 5 == 0  # (values long enough that the encoder does compress)
        values = [b"v" * (64 if gzip else 1)] * count
        log.append_as_leader(
            batch(values, timestamps=stamps, compression=GZIP if gzip else 0), n // 10, 1
        )
    assert len(log.local.segments) > 3
    log.update_high_watermark(log.log_end_offset)
    log.delete_records_before(7)
    for target in [*range(0, 5100, 37), 4999, 5000, 5001]:
        assert log.offset_for_timestamp(target) == _oracle(log, target), target
    top = max(r.timestamp for b in parse(everything(log)) for r in b)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == _oracle(log, top)
