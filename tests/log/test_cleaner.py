"""The log cleaner on real logs in both storage modes: the latest record per key kept at its
offset, tombstones until their delete horizon, aborted transactions and their markers, the
last batch of an active producer, compressed batches rewritten, the cleaned log recovered and
replicated across its gaps; cleanup.policy against retention and the memory cap."""

from __future__ import annotations

from pathlib import Path

import pytest

from kmeta.log import InvalidRecordError, LogConfig, LogManager, LogStorageError
from kmeta.log.cleaner.log_cleaner import LogCleaner
from kmeta.log.record.record_set import DELETE_HORIZON_MASK
from tests.log.cleaner_helpers import contents, keyed, marker, put
from tests.log.conftest import Make
from tests.log.helpers import GZIP, LZ4, SNAPPY, batch, everything, parse

DAY = 86_400_000
NOW = 1_000_000


def _fill(log, rounds: int = 4, keys: int = 5):  # type: ignore[no-untyped-def]
    for r in range(rounds):
        for k in range(keys):
            put(log, keyed([(b"k%d" % k, b"v%d-%d" % (k, r))]))


def test_latest_value_per_key_at_its_offset(make: Make, mode: str) -> None:
    log = make(cleanup_policy="compact", segment_bytes=300)
    _fill(log)
    put(log, keyed([(b"k0", b"last")]))  # (in the active segment: never cleaned)
    before = len(log.local.segments)
    end, start = log.log_end_offset, log.log_start_offset
    result = LogCleaner().clean(log, NOW)
    assert result.end_offset == log.local.active.base_offset
    got = contents(log)
    assert got == [(o, b"k%d" % k, b"v%d-3" % k) for k, o in zip(range(5), range(15, 20), strict=True)] + [
        (20, b"k0", b"last")
    ]
    assert (log.log_start_offset, log.log_end_offset) == (start, end)
    LogCleaner().clean(log, NOW)  # (groups are sized by their input, as Kafka's)
    assert contents(log) == got
    assert len(log.local.segments) < before  # small cleaned segments merged
    for offset, _, _ in got:  # a fetch at any offset finds the next batch on
        first = parse(log.read(offset, 1 << 20, None).records)[0]
        assert first.base_offset <= offset < first.next_offset
    gap = parse(log.read(3, 1 << 20, None).records)[0]  # offset 3 was cleaned away
    assert gap.base_offset == 15


def test_tombstones_stay_until_the_delete_horizon(make: Make) -> None:
    log = make(cleanup_policy="compact", segment_bytes=200, delete_retention_ms=1000)
    put(log, keyed([(b"a", b"1"), (b"b", b"1")]))
    put(log, keyed([(b"a", None)]))
    put(log, keyed([(b"c", b"1")]))
    put(log, keyed([(b"c", b"2")]))
    log.local.roll()  # (as segment.ms would: the active segment is never cleaned)
    cleaner = LogCleaner()
    cleaner.clean(log, NOW)
    assert contents(log) == [(1, b"b", b"1"), (2, b"a", None), (4, b"c", b"2")]
    tomb = parse(log.read(2, 1 << 20, None).records)[0]
    assert tomb.attributes & DELETE_HORIZON_MASK
    assert tomb.first_timestamp == NOW + 1000
    assert next(iter(tomb)).timestamp == 1000  # the record's own timestamp is unchanged
    assert cleaner.due(log, NOW + 999) is None
    assert cleaner.due(log, NOW + 1000) is not None  # the horizon passed: due again
    cleaner.clean(log, NOW + 1000)
    assert contents(log) == [(1, b"b", b"1"), (4, b"c", b"2")]


def test_not_due_below_the_dirty_ratio(make: Make) -> None:
    log = make(cleanup_policy="compact", segment_bytes=200, min_cleanable_dirty_ratio=0.9)
    _fill(log, rounds=2)
    cleaner = LogCleaner()
    assert cleaner.due(log, NOW) is not None  # all dirty
    cleaner.clean(log, NOW)
    put(log, keyed([(b"k1", b"x")]))
    put(log, keyed([(b"k1", b"y")]))
    assert cleaner.due(log, NOW) is None  # a little dirt over a clean log
    assert cleaner.due(make(segment_bytes=200), NOW) is None  # delete policy: never


def test_min_compaction_lag_keeps_young_segments_dirty(make: Make) -> None:
    log = make(cleanup_policy="compact", segment_bytes=200, min_compaction_lag_ms=5000)
    for i in range(6):
        put(log, keyed([(b"k", b"%d" % i)], ts=NOW - 10_000 if i < 4 else NOW))
    log.local.roll()
    LogCleaner().clean(log, NOW)  # segments [0, 1] [2, 3] old enough, [4, 5] not
    assert [v for _, _, v in contents(log)] == [b"3", b"4", b"5"]


def test_keyless_records_refused_on_a_compacted_topic(make: Make) -> None:
    log = make(cleanup_policy="compact")
    with pytest.raises(InvalidRecordError, match="without key"):
        log.append_as_leader(batch([b"v"]), 0, 1)
    assert log.log_end_offset == 0
    log.append_as_leader(keyed([(b"k", b"v")]), 0, 1)
    make(cleanup_policy="delete").append_as_leader(batch([b"v"]), 0, 1)


def test_last_batch_of_an_active_producer_stays(make: Make) -> None:
    log = make(cleanup_policy="compact", segment_bytes=200)
    put(log, keyed([(b"k", b"1"), (b"j", b"1")], producer_id=7, epoch=2, sequence=0, ts=NOW))
    put(log, keyed([(b"k", b"2"), (b"j", b"2")], producer_id=8, epoch=0, sequence=0, ts=NOW))
    put(log, keyed([(b"k", b"3")], producer_id=8, epoch=0, sequence=2, ts=NOW))
    put(log, keyed([(b"j", b"3"), (b"k", b"4")]))
    put(log, keyed([(b"z", b"z")]))
    log.local.roll()
    LogCleaner().clean(log, NOW)
    batches = parse(everything(log))
    kept = {(b.base_offset, b.last_offset, b.producer_id, b.base_sequence, b.records_count) for b in batches}
    assert (0, 1, 7, 0, 0) in kept  # emptied, kept for producer 7's last sequence
    assert (4, 4, 8, 2, 0) in kept  # producer 8's last batch; its first one went
    assert all(b.base_offset != 2 for b in batches)
    LogCleaner().clean(log, NOW + 2 * DAY)  # the producers expired: their batches go
    assert [b.producer_id for b in parse(everything(log))] == [-1, -1]


def test_aborted_transactions_and_markers(make: Make) -> None:
    log = make(cleanup_policy="compact", segment_bytes=150, delete_retention_ms=1000)
    put(log, keyed([(b"a", b"aborted")], producer_id=5, epoch=0, sequence=0, transactional=True, ts=NOW))
    put(log, marker(5, 0, commit=False, ts=NOW))
    put(log, keyed([(b"b", b"committed")], producer_id=5, epoch=0, sequence=1, transactional=True, ts=NOW))
    put(log, marker(5, 0, commit=True, ts=NOW))
    put(log, keyed([(b"a", b"plain")]))
    put(log, keyed([(b"z", b"z")]))
    log.local.roll()
    cleaner = LogCleaner()
    cleaner.clean(log, NOW)
    assert contents(log) == [(2, b"b", b"committed"), (4, b"a", b"plain"), (5, b"z", b"z")]
    controls = [b for b in parse(everything(log)) if b.is_control_batch]
    assert [b.base_offset for b in controls] == [1, 3]  # the ABORT marker still: its batch was seen
    cleaner.clean(log, NOW + 10)  # no aborted batch left: the ABORT marker takes a horizon
    controls = [b for b in parse(everything(log)) if b.is_control_batch]
    assert controls[0].attributes & DELETE_HORIZON_MASK
    cleaner.clean(log, NOW + 2000)
    left = [b.base_offset for b in parse(everything(log)) if b.is_control_batch]
    assert left == [3]  # the COMMIT stays while its transaction's batch does


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4])
def test_compressed_batches_rewritten_with_their_codec(make: Make, codec: int) -> None:
    log = make(cleanup_policy="compact", segment_bytes=4000)
    big = b"x" * 500  # (kafka-python keeps a batch uncompressed when that is smaller)
    put(log, keyed([(b"a", big), (b"b", big), (b"c", big)], compression=codec))
    assert parse(everything(log))[0].compression_type == codec
    put(log, keyed([(b"b", b"2")], compression=codec))
    put(log, keyed([(b"z", b"z")]))
    log.local.roll()
    LogCleaner().clean(log, NOW)
    first = parse(log.read(0, 1 << 20, None).records)[0]
    assert (first.compression_type, first.base_offset, first.last_offset) == (codec, 0, 2)
    assert [(r.offset, r.key) for r in first] == [(0, b"a"), (2, b"c")]


def test_retention_and_memory_cap_spare_compacted_logs(make: Make, manager: LogManager, mode: str) -> None:
    compacted = make(cleanup_policy="compact", segment_bytes=200, retention_ms=1, retention_bytes=0)
    both = make(cleanup_policy="compact,delete", segment_bytes=200, retention_ms=1)
    for log in (compacted, both):
        _fill(log, rounds=1)
    manager.enforce_retention(NOW)
    assert len(contents(compacted)) == 5
    assert both.log_start_offset > 0
    if mode == "memory":
        assert compacted.oldest_deletable_segment() is None


def test_memory_cap_refuses_appends_rather_than_drop_compacted_data() -> None:
    manager = LogManager(None, 4000)
    log = manager.get_or_create("c", 0, None, LogConfig(cleanup_policy="compact", segment_bytes=500))
    refused = None
    for i in range(200):
        try:
            log.append_as_leader(keyed([(b"k%d" % i, b"x" * 50)]), 0, 1)
        except LogStorageError as exc:
            refused = exc
            break
        log.update_high_watermark(log.log_end_offset)
        manager.enforce_retention(NOW)
    assert "Memory cap" in str(refused)
    assert len(contents(log)) == log.log_end_offset  # nothing dropped
    assert manager.memory_bytes <= 4000 + 200
    other = manager.get_or_create("d", 0, None, LogConfig())
    with pytest.raises(LogStorageError):
        other.append_as_leader(batch([b"y" * 200]), 0, 1)
    manager.delete("c", 0)  # memory freed: appends go on
    other.append_as_leader(batch([b"y" * 200]), 0, 1)


def test_cleaned_log_recovers_from_its_files(tmp_path: Path) -> None:
    manager = LogManager(str(tmp_path), 1 << 28)
    log = manager.get_or_create("t", 0, None, LogConfig(cleanup_policy="compact", segment_bytes=300))
    _fill(log)
    put(log, keyed([(b"k0", b"last")]))
    LogCleaner().clean(log, NOW)
    expected = contents(log)
    files = sorted(p.name for p in (tmp_path / "t-0").iterdir())
    manager.close()
    manager = LogManager(str(tmp_path), 1 << 28)
    manager.load()
    again = manager.get_or_create("t", 0, None, LogConfig(cleanup_policy="compact", segment_bytes=300))
    assert contents(again) == expected
    assert [n for n in sorted(p.name for p in (tmp_path / "t-0").iterdir()) if n in files] == files
    assert LogCleaner().state(again).first_dirty_offset == again.local.active.base_offset
    manager.close()


def test_a_swap_cut_short_recovers(tmp_path: Path) -> None:
    """A crash after the merged segment replaced the first file but before the others went:
    recovery drops the files the merged one covers, and ``.cleaned`` leftovers."""
    manager = LogManager(str(tmp_path), 1 << 28)
    log = manager.get_or_create("t", 0, None, LogConfig(cleanup_policy="compact", segment_bytes=300))
    _fill(log)
    put(log, keyed([(b"k0", b"last")]))
    d = tmp_path / "t-0"
    saved = {p.name: p.read_bytes() for p in d.iterdir() if p.suffix == ".log"}
    LogCleaner().clean(log, NOW)
    expected = contents(log)
    manager.close()
    for name, data in saved.items():  # the merged-away files back, as a crash leaves them
        if not (d / name).exists():
            (d / name).write_bytes(data)
    (d / "00000000000000000099.log.cleaned").write_bytes(b"junk")
    manager = LogManager(str(tmp_path), 1 << 28)
    manager.load()
    again = manager.get_or_create("t", 0, None, LogConfig(cleanup_policy="compact"))
    got = contents(again)
    assert got[-6:] == expected[-6:]  # the latest value of every key, last, at its offset
    assert not (d / "00000000000000000099.log.cleaned").exists()
    manager.close()


def test_a_follower_replicates_across_the_gaps(make: Make) -> None:
    leader = make(cleanup_policy="compact", segment_bytes=300)
    _fill(leader)
    put(leader, keyed([(b"k0", b"last")]))
    LogCleaner().clean(leader, NOW)
    follower = make(cleanup_policy="compact", segment_bytes=300)
    while follower.log_end_offset < leader.log_end_offset:
        chunk = leader.read(follower.log_end_offset, 1 << 20, None).records
        assert follower.append_as_follower(chunk) is not None
    assert contents(follower) == contents(leader)


def test_segment_ms_rolls_the_active_segment(make: Make) -> None:
    log = make(cleanup_policy="compact", segment_ms=1000)
    log.append_as_leader(keyed([(b"k", b"1")], ts=NOW), 0, NOW)
    log.append_as_leader(keyed([(b"k", b"2")], ts=NOW + 500), 0, NOW)
    assert len(log.local.segments) == 1
    log.append_as_leader(keyed([(b"k", b"3")], ts=NOW + 1001), 0, NOW)
    assert [s.base_offset for s in log.local.segments] == [0, 2]


def test_a_cleaning_computed_aside_is_installed_only_onto_the_log_it_read(
    make: Make, manager: LogManager
) -> None:
    log = make(cleanup_policy="compact", segment_bytes=300)
    _fill(log)
    task = manager.plan_clean(NOW)
    assert task is not None
    task.compute()
    put(log, keyed([(b"k1", b"meanwhile")]))  # appends go to the active segment: fine
    result = manager.finish_clean(task)
    assert result is not None
    assert contents(log)[-1] == (20, b"k1", b"meanwhile")
    _fill(log, rounds=2)
    again = manager.plan_clean(NOW)
    assert again is not None
    again.compute()
    kept = contents(log)
    log.truncate_to(log.local.segments[1].base_offset)  # (a follower's truncation meanwhile)
    assert manager.finish_clean(again) is None
    assert contents(log) == [r for r in kept if r[0] < log.log_end_offset]


def test_truncation_into_a_cleaned_gap_then_appends(make: Make) -> None:
    log = make(cleanup_policy="compact", segment_bytes=300)
    for i in range(12):
        put(log, keyed([(b"k", b"%d" % i)] if i % 4 else [(b"x%d" % i, b"keep")]))
    log.local.roll()
    LogCleaner().clean(log, NOW)
    end = log.local.segments[0].next_offset
    assert end < log.local.segments[1].base_offset  # a gap at its end
    view = log.read(0, 1 << 20, None).records  # (a zero-copy view, in memory)
    log.truncate_to(end + 1)  # inside the gap: the cleaned segment is last
    assert log.log_end_offset == end
    put(log, keyed([(b"k", b"again")]))
    assert contents(log)[-1] == (end, b"k", b"again")
    assert parse(bytes(view))[0].base_offset == 0


def test_a_recovered_log_ends_where_it_did_when_cleaning_emptied_its_tail(tmp_path: Path) -> None:
    manager = LogManager(str(tmp_path), 1 << 28)
    config = LogConfig(cleanup_policy="compact", segment_bytes=200, delete_retention_ms=0)
    log = manager.get_or_create("t", 0, None, config)
    put(log, keyed([(b"a", b"1")]))
    put(log, keyed([(b"b", b"1")]))
    put(log, keyed([(b"a", None)]))
    put(log, keyed([(b"b", None)]))
    log.local.roll()  # (the new active segment has no record, so no file of its own yet)
    cleaner = LogCleaner()
    cleaner.clean(log, NOW)
    cleaner.clean(log, NOW + 1)  # the tombstones' horizon passed: the log holds nothing
    assert contents(log) == []
    assert log.log_end_offset == 4
    manager.close()
    manager = LogManager(str(tmp_path), 1 << 28)
    manager.load()
    again = manager.get_or_create("t", 0, None, config)
    assert again.log_end_offset == 4  # offsets are never handed out twice
    manager.close()


def test_list_offsets_by_time_across_cleaned_gaps(make: Make) -> None:
    log = make(cleanup_policy="compact", segment_bytes=250, delete_retention_ms=DAY)
    for i in range(8):  # offset i at timestamp 10_000 + 1000 i; keys a b a b ... , a tombstone at 6
        put(log, keyed([(b"ab"[i % 2 : i % 2 + 1], None if i == 6 else b"%d" % i)], ts=10_000 + 1000 * i))
    log.local.roll()
    LogCleaner().clean(log, NOW)
    assert [o for o, _, _ in contents(log)] == [6, 7]
    assert log.offset_for_timestamp(10_000)[:2] == (6, 16_000)  # before the gap: the next record
    assert log.offset_for_timestamp(16_000)[:2] == (6, 16_000)  # the tombstone, its own time
    assert log.offset_for_timestamp(16_500)[:2] == (7, 17_000)
    assert log.offset_for_timestamp(17_001) is None


def test_a_full_offset_map_cleans_part_and_the_next_cleaning_the_rest(make: Make) -> None:
    log = make(cleanup_policy="compact", segment_bytes=200)
    for r in range(2):
        for k in range(6):
            put(log, keyed([(b"k%d" % k, b"%d" % r)]))
    log.local.roll()
    cleaner = LogCleaner(max_keys=3)
    first = cleaner.clean(log, NOW)
    assert first.end_offset == 3  # k0 k1 k2 mapped, then the map was full
    assert [o for o, _, _ in contents(log)] == list(range(12))  # their later values lie past it
    second = cleaner.clean(log, NOW)
    assert (second.first_dirty_offset, second.end_offset) == (3, 6)
    while cleaner.state(log).first_dirty_offset < log.local.active.base_offset:
        cleaner.clean(log, NOW)
    assert cleaner.clean(log, NOW).end_offset == 12
    assert [(o, k) for o, k, _ in contents(log)] == [(6 + k, b"k%d" % k) for k in range(6)]


def test_a_restarted_cleaner_knows_the_horizons_written_before(tmp_path: Path) -> None:
    config = LogConfig(cleanup_policy="compact", segment_bytes=200, delete_retention_ms=1000,
                       min_cleanable_dirty_ratio=0.99)  # fmt: skip
    manager = LogManager(str(tmp_path), 1 << 28)
    log = manager.get_or_create("t", 0, None, config)
    put(log, keyed([(b"a", b"1")]))
    put(log, keyed([(b"a", None)]))
    put(log, keyed([(b"b", b"1")]))
    log.local.roll()
    LogCleaner().clean(log, NOW)
    manager.close()
    manager = LogManager(str(tmp_path), 1 << 28)
    manager.load()
    again = manager.get_or_create("t", 0, None, config)
    cleaner = LogCleaner()
    assert cleaner.due(again, NOW + 999) is None  # clean, and the tombstone's time not come
    assert cleaner.due(again, NOW + 1000) is not None
    cleaner.clean(again, NOW + 1000)
    assert contents(again) == [(2, b"b", b"1")]
    manager.close()
