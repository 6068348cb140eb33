"""Producer state snapshot files (Kafka's ``<offset>.snapshot``): their bytes in Kafka's
version-1 layout, written at each segment roll and on close, removed with their segments,
loaded at recovery (the log replayed from them only), a corrupt one ignored and the state
rebuilt from the log, and a producer whose batches all went with retention still known after
a restart, clean or not."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from kmeta.log import LogConfig, LogManager, PartitionLog
from kmeta.log.producer.producer_entry import ProducerStateEntry
from kmeta.log.producer.producer_snapshot import (
    CorruptSnapshotError,
    ProducerSnapshotFiles,
    decode,
    encode,
    snapshot_file_name,
)
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.records.record_batch import crc32c
from tests.log.helpers import batch as plain
from tests.log.test_producer_state import PID, error_of, idem, marker


def _open(tmp_path: Path, **config: int) -> PartitionLog:
    return PartitionLog("t", 0, None, LogConfig(**config), log_dir=str(tmp_path))  # type: ignore[arg-type]


def _snapshots(tmp_path: Path) -> list[str]:
    return sorted(n for n in os.listdir(tmp_path / "t-0") if n.endswith(".snapshot"))


def _summary(log: PartitionLog) -> tuple[object, ...]:
    """What a snapshot keeps of each producer, and the transactions' state."""
    ps = log.producer_state
    producers = {
        pid: (e.producer_epoch, e.last_seq, e.batches[-1] if e.batches else None, e.coordinator_epoch,
              e.current_txn_first_offset)
        for pid, e in ps.producers.items()
    }  # fmt: skip
    return producers, dict(ps.ongoing), list(ps.aborted), log.last_stable_offset


def test_bytes_are_kafkas_version_1_layout() -> None:
    e = ProducerStateEntry(7)
    e.add_batch(3, 10, 14, 100, 104, 5555)
    e.coordinator_epoch, e.current_txn_first_offset = 2, 100
    marker_only = ProducerStateEntry(8)
    marker_only.producer_epoch, marker_only.last_timestamp = 1, 6000
    data = encode([e, marker_only])
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 2)
    assert crc == crc32c(data[6:])  # (over everything after the crc field)
    assert struct.unpack_from(">qhiqiqiq", data, 10) == (7, 3, 14, 104, 4, 5555, 2, 100)
    assert struct.unpack_from(">qhiqiqiq", data, 10 + 46) == (8, 1, -1, -1, 0, 6000, -1, -1)
    assert len(data) == 10 + 2 * 46
    back = decode(data)
    assert [b.producer_id for b in back] == [7, 8]
    assert back[0].batches == [(10, 14, 100, 104, 5555)]
    assert back[0].producer_epoch == 3
    assert (back[0].coordinator_epoch, back[0].current_txn_first_offset) == (2, 100)
    assert back[1].batches == []
    assert back[1].producer_epoch == 1
    # a wrapped sequence: the batch's first sequence goes back past Int32.MAX
    w = ProducerStateEntry(9)
    w.add_batch(0, (1 << 31) - 2, 1, 50, 53, 1)
    assert decode(encode([w]))[0].batches[0].first_seq == (1 << 31) - 2


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d[:-1],  # torn
        lambda d: d[:20] + bytes([d[20] ^ 1]) + d[21:],  # a flipped bit
        lambda d: struct.pack(">h", 2) + d[2:],  # an unknown version
        lambda d: b"",
        lambda d: d[:6] + struct.pack(">i", 3) + d[10:],  # a count the bytes do not hold
    ],
)
def test_a_damaged_snapshot_is_refused(damage: object) -> None:
    e = ProducerStateEntry(7)
    e.add_batch(0, 0, 0, 0, 0, 1)
    with pytest.raises(CorruptSnapshotError):
        decode(damage(encode([e])))  # type: ignore[operator]


def test_files_written_at_roll_and_close_owner_only_and_removed_with_their_segments(tmp_path: Path) -> None:
    log = _open(tmp_path, segment_bytes=400)
    log.append_as_leader(plain([b"x" * 100]), 0, 1)
    log.append_as_leader(plain([b"x" * 100]), 0, 1)
    log.append_as_leader(plain([b"x" * 300]), 0, 1)  # a roll, but no producer yet: no file
    assert _snapshots(tmp_path) == []
    log.append_as_leader(idem(0, 2), 0, 1)
    for _i in range(6):
        log.append_as_leader(plain([b"y" * 300]), 0, 1)
    names = _snapshots(tmp_path)
    bases = [s.base_offset for s in log.local.segments]
    assert names
    assert names == [snapshot_file_name(b) for b in bases if b > 3]
    for name in names:
        assert os.stat(tmp_path / "t-0" / name).st_mode & 0o777 == 0o600
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith(".tmp")]
    log.update_high_watermark(log.log_end_offset)
    log.delete_records_before(bases[-2])
    assert _snapshots(tmp_path) == [snapshot_file_name(b) for b in bases[-2:]]
    end = log.log_end_offset
    log.close()
    assert _snapshots(tmp_path)[-1] == snapshot_file_name(end)


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
def test_a_producer_whose_batches_all_went_with_retention_is_still_known(tmp_path: Path, clean: bool) -> None:
    log = _open(tmp_path, segment_bytes=500)
    log.append_as_leader(idem(0, 3), 0, 1)  # offsets 0-2
    log.append_as_leader(idem(3, 2), 0, 1)  # offsets 3-4: the last batch
    for _ in range(4):
        log.append_as_leader(plain([b"z" * 400]), 0, 1)
    log.update_high_watermark(log.log_end_offset)
    log.delete_records_before(log.log_end_offset)  # every segment but an empty active one
    assert log.log_start_offset == log.log_end_offset == 9
    if clean:
        log.close()
    else:  # (kill -9: nothing flushed or written on the way out; the roll's snapshot stays)
        log.local.close()
    log = _open(tmp_path, segment_bytes=500)
    assert log.log_start_offset == 9
    again = log.append_as_leader(idem(3, 2), 0, 1)  # a retry of the last batch
    assert (again.first_offset, again.last_offset, again.record_count, log.log_end_offset) == (3, 4, 0, 9)
    assert error_of(log, idem(7)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append_as_leader(idem(5), 0, 1).first_offset == 9
    log.close()


def test_without_snapshots_the_producer_is_forgotten(tmp_path: Path) -> None:
    """The test above fails without the files: the restarted log takes any sequence."""
    log = _open(tmp_path, segment_bytes=500)
    log.append_as_leader(idem(0, 3), 0, 1)
    for _ in range(3):
        log.append_as_leader(plain([b"z" * 400]), 0, 1)
    log.update_high_watermark(log.log_end_offset)
    log.delete_records_before(log.log_end_offset)
    log.close()
    for name in _snapshots(tmp_path):
        os.unlink(tmp_path / "t-0" / name)
    log = _open(tmp_path, segment_bytes=500)
    assert log.append_as_leader(idem(7), 0, 1).first_offset == log.log_end_offset - 1
    log.close()


def _mixed_log(tmp_path: Path) -> PartitionLog:
    """Idempotent and transactional producers across segments, transactions open across
    the rolls (so across the snapshots), committed and aborted."""
    log = _open(tmp_path, segment_bytes=2000)
    seqs = dict.fromkeys((1, 2, 3, 4), 0)
    for i in range(300):
        pid = 1 + i % 4
        txn = pid >= 3
        log.append_as_leader(idem(seqs[pid], 2, pid=pid, txn=txn, epoch=i // 150), 0, 1)
        seqs[pid] += 2
        if txn and i % 7 == 6:
            marker(log, commit=i % 2 == 0, pid=pid, epoch=i // 150)
        if i == 149:  # a new epoch (re-initialised producers): open transactions aborted
            for p in (3, 4):
                if p in log.producer_state.ongoing:
                    marker(log, commit=False, pid=p, epoch=1)
            seqs = dict.fromkeys(seqs, 0)
    log.update_high_watermark(log.log_end_offset - 5)
    assert len(log.local.segments) > 5
    assert log.producer_state.aborted
    assert log.producer_state.ongoing
    return log


def test_recovery_from_a_snapshot_gives_the_state_a_full_rebuild_gives(tmp_path: Path) -> None:
    log = _mixed_log(tmp_path)
    before = _summary(log)
    log.flush()
    log.local.close()  # (a crash: the latest snapshot is the last roll's)
    assert _snapshots(tmp_path)
    from_snapshot = _open(tmp_path, segment_bytes=2000)
    assert from_snapshot.recovery_warnings == []
    latest = int(_snapshots(tmp_path)[-1][:20])
    assert [s.offset for s in from_snapshot.producer_state._snapshots] == [latest]  # (loaded)
    assert _summary(from_snapshot) == before
    from_snapshot.local.close()
    for name in _snapshots(tmp_path):
        os.unlink(tmp_path / "t-0" / name)
    rebuilt = _open(tmp_path, segment_bytes=2000)
    assert _summary(rebuilt) == before
    rebuilt.close()


def test_a_corrupt_snapshot_is_ignored_with_a_warning_and_the_log_replayed(tmp_path: Path) -> None:
    log = _mixed_log(tmp_path)
    before = _summary(log)
    log.close()
    latest = tmp_path / "t-0" / _snapshots(tmp_path)[-1]
    data = bytearray(latest.read_bytes())
    data[-3] ^= 0xFF
    latest.write_bytes(bytes(data))
    log = _open(tmp_path, segment_bytes=2000)
    assert len(log.recovery_warnings) == 1
    assert str(latest) in log.recovery_warnings[0]
    assert "CRC" in log.recovery_warnings[0]
    assert not latest.exists()  # (deleted: the next restart does not warn again)
    assert _summary(log) == before  # (from the snapshot before it, and the batches after)
    log.close()


def test_a_snapshot_past_the_recovered_end_is_not_used(tmp_path: Path) -> None:
    """A crash cut the log below a snapshot (its segments not flushed): it goes, and the
    state comes from the batches that are left."""
    log = _mixed_log(tmp_path)
    log.close()
    files = ProducerSnapshotFiles(str(tmp_path / "t-0"), lambda: None)
    bogus = ProducerStateEntry(77)
    bogus.add_batch(0, 0, 0, 10**6, 10**6, 1)
    files.write(10**6, [bogus])
    log = _open(tmp_path, segment_bytes=2000)
    assert 77 not in log.producer_state.producers
    assert snapshot_file_name(10**6) not in _snapshots(tmp_path)
    log.close()


def test_truncation_below_the_in_memory_snapshots_reloads_a_snapshot_file(tmp_path: Path) -> None:
    """After a restart a follower truncating below the clean shutdown's snapshot reloads an
    earlier file (Kafka's truncateAndReload): a producer known only from it stays known."""
    log = _open(tmp_path, segment_bytes=500)
    log.append_as_leader(idem(0, 2, pid=50), 0, 1)
    for _ in range(3):
        log.append_as_leader(plain([b"z" * 400]), 0, 1)
    log.update_high_watermark(log.log_end_offset)
    log.delete_records_before(log.local.segments[-1].base_offset)  # pid 50's batch goes
    cut = log.log_end_offset
    log.append_as_leader(idem(0, 2), 0, 1)
    log.append_as_leader(idem(2, 2), 0, 1)
    log.close()
    log = _open(tmp_path, segment_bytes=500)
    log.truncate_to(cut + 2)  # below the close's snapshot, above the roll's
    assert all(int(n[:20]) <= cut + 2 for n in _snapshots(tmp_path))
    assert log.producer_state.producers[50].last_seq == 1
    assert log.producer_state.producers[PID].last_seq == 1
    assert error_of(log, idem(3)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append_as_leader(idem(2, 2), 0, 1).first_offset == cut + 2
    log.close()


def test_the_log_manager_collects_what_recovery_ignored(tmp_path: Path) -> None:
    """The broker says these at WARN at start (ReplicaManager.startup)."""
    log = _open(tmp_path, segment_bytes=500)
    log.append_as_leader(idem(0, 2), 0, 1)
    log.close()
    [name] = _snapshots(tmp_path)
    (tmp_path / "t-0" / name).write_bytes(b"\x00\x01garbage")
    manager = LogManager(str(tmp_path), 1 << 20)
    assert manager.load() == [("t", 0)]
    [(where, what)] = manager.load_warnings
    assert where == "t-0"
    assert "ignored" in what
    loaded = manager.get("t", 0)
    assert loaded is not None
    assert loaded.producer_state.producers[PID].last_seq == 1  # (from the log)
    manager.close()
