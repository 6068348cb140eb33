"""Segments roll at segment.bytes; retention.bytes / retention.ms and DeleteRecords move the
log start and drop whole segments, never past the high watermark; the broker-wide memory cap
drops the oldest segments across logs. Both storage modes (the cap: memory only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kmeta.log import LogConfig, LogManager, OffsetOutOfRangeError
from tests.log.conftest import Make
from tests.log.helpers import append_n, batch, everything, parse, sized


def test_rolls_at_segment_bytes(make: Make, mode: str) -> None:
    log = make(segment_bytes=1000)
    for _ in range(25):
        log.append_as_leader(sized(100), 0, 1)
    assert [s.base_offset for s in log.local.segments] == [0, 10, 20]
    assert [s.size for s in log.local.segments] == [1000, 1000, 500]
    assert len(everything(log)) == 2500
    big = sized(1500)  # bigger than a segment: a segment of its own
    log.append_as_leader(big, 0, 1)
    assert [s.base_offset for s in log.local.segments] == [0, 10, 20, 25]
    assert parse(log.read(25, 10, None).records)[0].base_offset == 25
    if mode == "files":
        files = sorted(p.name for p in Path(str(log.dir)).iterdir() if p.suffix == ".log")
        assert files == [f"{b:020d}.log" for b in (0, 10, 20, 25)]


def test_retention_bytes_keeps_at_least_the_limit(make: Make) -> None:
    log = make(segment_bytes=1000, retention_bytes=2500)
    for _ in range(45):
        log.append_as_leader(
            sized(100), 0, 1
        )  # segments [0..9] [10..19] [20..29] [30..39] [40..44]
    assert log.enforce_retention(1) == 0  # nothing below the high watermark yet
    log.update_high_watermark(45)
    assert log.enforce_retention(1) == 2000  # 4500 -> 2500: one more would go below the limit
    assert log.log_start_offset == 20
    assert log.size_in_bytes == 2500
    assert log.enforce_retention(1) == 0
    log.append_as_leader(sized(100), 0, 1)
    log.update_high_watermark(46)
    assert log.enforce_retention(1) == 0  # 2600: dropping 1000 would leave 1600 < 2500
    with pytest.raises(OffsetOutOfRangeError):
        log.read(19, 1 << 20, None)
    assert parse(log.read(20, 1, None).records)[0].base_offset == 20


def test_retention_stops_at_the_high_watermark(make: Make) -> None:
    log = make(segment_bytes=1000, retention_bytes=0)
    for _ in range(30):
        log.append_as_leader(sized(100), 0, 1)
    log.update_high_watermark(15)  # segment [10..19] is not wholly below it
    assert log.enforce_retention(1) == 1000
    assert log.log_start_offset == 10
    log.update_high_watermark(30)  # all of it, the active segment too (Kafka rolls first)
    assert log.enforce_retention(1) == 2000
    assert (log.log_start_offset, log.log_end_offset, log.size_in_bytes) == (30, 30, 0)
    assert log.read(30, 100, None).records == b""
    log.append_as_leader(sized(100), 0, 1)
    assert parse(log.read(30, 100, None).records)[0].base_offset == 30


def test_retention_ms_by_newest_timestamp(make: Make) -> None:
    log = make(segment_bytes=1000, retention_ms=10_000)
    for i in range(30):  # record timestamps 1000 + 1000 * i: segment k's newest is 10_000k + 10_000
        log.append_as_leader(batch([b"x" * 20], timestamps=[1000 + 1000 * i]), 0, 50_000)
    sizes = [s.size for s in log.local.segments]
    log.update_high_watermark(log.log_end_offset)
    per_segment = [s.max_timestamp for s in log.local.segments]
    assert log.enforce_retention(per_segment[0] + 10_000) == 0  # not older than retention.ms
    assert log.enforce_retention(per_segment[0] + 10_001) == sizes[0]
    assert log.log_start_offset == log.local.segments[0].base_offset > 0
    assert log.enforce_retention(per_segment[-1] + 10_001) == sum(sizes[1:])
    assert log.log_start_offset == log.log_end_offset == 30


def test_delete_records_before(make: Make) -> None:
    log = make(segment_bytes=1000)
    for _ in range(30):
        log.append_as_leader(sized(100), 0, 1)
    log.update_high_watermark(25)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(26)
    assert log.delete_records_before(15) == 15
    assert [s.base_offset for s in log.local.segments] == [10, 20]  # [0..9] went whole
    with pytest.raises(OffsetOutOfRangeError):
        log.read(14, 100, None)
    assert parse(log.read(15, 1, None).records)[0].base_offset == 15
    assert log.delete_records_before(3) == 15  # never backwards
    assert log.offset_for_timestamp(-2) == (15, -1, 0)
    assert log.delete_records_before(25) == 25
    assert log.high_watermark == 25


def test_memory_cap_drops_the_oldest_segments_across_logs() -> None:
    manager = LogManager(None, 64 * 1024)  # memory-mode segments roll at 64 KiB (the floor)
    a = manager.get_or_create("a", 0, None, LogConfig(segment_bytes=10_000))
    b = manager.get_or_create("b", 0, None, LogConfig(segment_bytes=10_000))
    for log in (a, b, a, b):  # a's first 20 KB, then b's, then a's next, then b's
        for _ in range(20):
            log.append_as_leader(sized(1000), 0, 1)
        log.update_high_watermark(log.log_end_offset)
    assert manager.memory_bytes == 80_000
    freed = manager.enforce_retention(1)
    assert freed == 20_000
    assert manager.memory_bytes == 60_000
    assert (a.log_start_offset, b.log_start_offset) == (20, 0)  # a's first two, appended first
    with pytest.raises(OffsetOutOfRangeError):
        a.read(0, 100, None)
    manager.close()


def test_memory_cap_order_is_least_recently_appended() -> None:
    manager = LogManager(None, 25_000)
    old = manager.get_or_create("old", 0, None, LogConfig(segment_bytes=10_000))
    new = manager.get_or_create("new", 0, None, LogConfig(segment_bytes=10_000))
    for log in (old, new):
        for _ in range(20):
            log.append_as_leader(sized(1000), 0, 1)
        log.update_high_watermark(log.log_end_offset)
    assert manager.enforce_retention(1) == 20_000  # 40 KB -> 20 KB: old's two segments
    assert (old.log_start_offset, new.log_start_offset) == (20, 0)
    assert old.size_in_bytes == 0
    assert new.size_in_bytes == 20_000
    new.update_high_watermark(5)  # what is not below the high watermark stays, cap or not
    for _ in range(10):
        new.append_as_leader(sized(1000), 0, 1)
    assert manager.enforce_retention(1) == 0
    assert manager.memory_bytes == 30_000
    manager.close()


def test_memory_cap_ignores_file_logs(tmp_path: Path) -> None:
    manager = LogManager(str(tmp_path), 1000)
    log = manager.get_or_create("t", 0, None, LogConfig())
    append_n(log, 50)
    log.update_high_watermark(50)
    assert manager.memory_bytes == 0
    assert manager.enforce_retention(1) == 0
    assert log.log_start_offset == 0
    manager.close()


def test_delete_drops_the_log_and_its_bytes(manager: LogManager, make: Make, mode: str) -> None:
    log = make()
    append_n(log, 5)
    assert manager.get("t", 0) is log
    manager.delete("t", 0)
    assert manager.get("t", 0) is None
    assert manager.memory_bytes == 0
    assert list(manager.logs()) == []
    if mode == "files":
        assert not Path(str(log.dir)).exists()
    fresh = manager.get_or_create("t", 0, None, LogConfig())
    assert fresh.log_end_offset == 0
