"""The leader-epoch cache as OffsetForLeaderEpoch reads it (Kafka's
``LeaderEpochFileCache.endOffsetFor`` cases), kept through truncation and the log start
moving; follower truncation. Both storage modes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kmeta.log import EpochEndOffset, OffsetOutOfRangeError, PartitionLog
from kmeta.log.epoch_cache import LeaderEpochFileCache
from tests.log.conftest import Make
from tests.log.helpers import append_n, batch, everything, parse


def _epochs_log(make: Make) -> PartitionLog:
    """Epoch 1 at 0 (offsets 0-3), epoch 3 at 4 (4-5), epoch 5 at 6 (6-8): log end 9."""
    log = make()
    append_n(log, 4, epoch=1)
    append_n(log, 2, epoch=3)
    append_n(log, 3, epoch=5)
    return log


def test_end_offset_for_epoch_as_kafka(make: Make) -> None:
    log = _epochs_log(make)
    assert log.latest_epoch == 5
    assert log.end_offset_for_epoch(5) == EpochEndOffset(5, 9)  # the latest: the log end
    assert log.end_offset_for_epoch(3) == (3, 6)  # where the next epoch starts
    assert log.end_offset_for_epoch(1) == (1, 4)
    assert log.end_offset_for_epoch(2) == (1, 4)  # between: the epoch below, the next's start
    assert log.end_offset_for_epoch(4) == (3, 6)
    assert log.end_offset_for_epoch(0) == (0, 0)  # below every epoch: the first entry's start
    assert log.end_offset_for_epoch(6) == (-1, -1)  # above the latest: unknown
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    assert make().end_offset_for_epoch(0) == (-1, -1)  # empty cache


def test_batches_carry_the_epoch_and_earliest_latest_answer_it(make: Make) -> None:
    log = _epochs_log(make)
    assert [b.leader_epoch for b in parse(everything(log))] == [1, 1, 1, 1, 3, 3, 5, 5, 5]
    assert log.offset_for_timestamp(-2) == (0, -1, 1)
    assert log.offset_for_timestamp(-4) == (0, -1, 1)
    assert log.offset_for_timestamp(-1) == (9, -1, 5)
    assert log.offset_for_timestamp(-5) == (-1, -1, -1)
    assert make().offset_for_timestamp(-1) == (0, -1, -1)


def test_a_new_leader_epoch_starts_before_its_first_append(make: Make) -> None:
    log = _epochs_log(make)
    log.maybe_assign_epoch_start_offset(7, log.log_end_offset)
    assert log.end_offset_for_epoch(5) == (5, 9)
    assert log.end_offset_for_epoch(7) == (7, 9)
    append_n(log, 1, epoch=7)
    assert log.end_offset_for_epoch(7) == (7, 10)


def test_a_lower_epoch_replaces_what_it_contradicts() -> None:
    cache = LeaderEpochFileCache(None)
    for epoch, start in ((1, 0), (3, 4), (5, 6)):
        cache.assign(epoch, start)
    cache.assign(5, 6)  # no change
    cache.assign(3, 8)  # an epoch below the latest: entries at or above it go (Kafka's warning)
    assert [tuple(e) for e in cache.entries] == [(1, 0), (3, 8)]
    cache.assign(4, 2)  # a start below entries: those go
    assert [tuple(e) for e in cache.entries] == [(1, 0), (4, 2)]


def test_truncate_to_a_batch_boundary(make: Make) -> None:
    log = _epochs_log(make)
    log.update_high_watermark(9)
    log.truncate_to(5)
    assert log.log_end_offset == 5
    assert log.high_watermark == 5
    assert log.end_offset_for_epoch(3) == (3, 5)
    assert log.latest_epoch == 3
    assert [b.base_offset for b in parse(everything(log))] == [0, 1, 2, 3, 4]
    log.truncate_to(4)
    assert log.latest_epoch == 1
    assert log.end_offset_for_epoch(1) == (1, 4)
    log.truncate_to(99)  # past the end: nothing
    assert log.log_end_offset == 4
    append_n(log, 1, epoch=6)
    assert log.end_offset_for_epoch(1) == (1, 4)
    assert log.end_offset_for_epoch(6) == (6, 5)
    with pytest.raises(OffsetOutOfRangeError):
        log.truncate_to(-1)


def test_truncate_inside_a_batch_drops_it_whole(make: Make) -> None:
    log = make()
    log.append_as_leader(batch([b"a", b"b"]), 0, 1)
    log.append_as_leader(batch([b"c", b"d", b"e"]), 1, 1)  # offsets 2-4
    log.truncate_to(3)
    assert log.log_end_offset == 2
    assert log.latest_epoch == 0
    info = log.append_as_leader(batch([b"x"]), 2, 1)
    assert info.first_offset == 2


def test_truncate_across_segments(make: Make, mode: str) -> None:
    log = make(segment_bytes=300)
    append_n(log, 20, epoch=2)  # ~80-byte batches, 3 per segment
    bases = [s.base_offset for s in log.local.segments]
    log.truncate_to(bases[2] + 1)
    assert [s.base_offset for s in log.local.segments] == bases[:3]
    assert log.log_end_offset == bases[2] + 1
    assert [b.base_offset for b in parse(everything(log))] == list(range(bases[2] + 1))
    if mode == "files":
        names = sorted(p.name for p in Path(str(log.dir)).glob("*.log"))
        assert names == [f"{b:020d}.log" for b in bases[:3]]


def test_truncate_fully_and_start_at(make: Make) -> None:
    log = _epochs_log(make)
    log.update_high_watermark(9)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (100, 100, 100)
    assert log.latest_epoch is None
    assert log.size_in_bytes == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(5, 100, None)
    assert log.append_as_leader(batch([b"a"]), 9, 1).first_offset == 100
    assert parse(log.read(100, 100, None).records)[0].base_offset == 100
    assert log.end_offset_for_epoch(9) == (9, 101)
    log.truncate_to(50)  # below the first segment: start again there
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)


def test_log_start_moving_collapses_epochs(make: Make) -> None:
    log = _epochs_log(make)
    log.update_high_watermark(9)
    log.delete_records_before(5)
    assert log.end_offset_for_epoch(3) == (3, 6)
    assert log.end_offset_for_epoch(1) == (1, 5)  # below the first entry now: its start
    assert log.offset_for_timestamp(-2) == (5, -1, 3)


@pytest.mark.parametrize("mode", ["files"])  # (a memory log writes no file)
def test_epoch_checkpoint_file_in_kafkas_format(make: Make) -> None:
    log = _epochs_log(make)
    text = (Path(str(log.dir)) / "leader-epoch-checkpoint").read_text()
    assert text == "0\n3\n1 0\n3 4\n5 6\n"
