"""With a log dir: segments are files that a restarted broker recovers, every batch
CRC-checked and a torn or corrupt tail cut at the last good batch; a write that fails fails
the append with KAFKA_STORAGE_ERROR and leaves the log, on disk and in memory, as it was: a
disk really full (a 1 MiB tmpfs; needs permission to mount, else skipped) and, with no mount,
a file size limit (RLIMIT_FSIZE: EFBIG)."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kmeta.log import LogConfig, LogManager, LogStorageError, PartitionLog
from kmeta.protocol.errors import ErrorCode
from tests.log.helpers import append_n, batch, everything, parse, sized


def _open(log_dir: Path, **config: int) -> tuple[LogManager, PartitionLog]:
    manager = LogManager(str(log_dir), 1 << 20)
    assert manager.load() in ([], [("t", 0)])
    return manager, manager.get_or_create("t", 0, None, LogConfig(**config))  # type: ignore[arg-type]


def _segment_files(log: PartitionLog) -> list[Path]:
    return sorted(Path(str(log.dir)).glob("*.log"))


def test_a_restart_keeps_the_log(tmp_path: Path) -> None:
    manager, log = _open(tmp_path, segment_bytes=400)
    for epoch in (1, 1, 2, 4, 4, 4, 4, 4, 4, 4):
        log.append_as_leader(batch([b"a", b"b"]), epoch, 1)
    log.update_high_watermark(16)
    log.delete_records_before(5)
    before = (everything(log), log.log_start_offset, log.log_end_offset, log.high_watermark)
    manager.close()
    again, log = _open(tmp_path, segment_bytes=400)
    assert (everything(log), log.log_start_offset, log.log_end_offset, log.high_watermark) == before
    assert log.log_start_offset == 5
    assert log.high_watermark == 16
    assert log.end_offset_for_epoch(2) == (2, 6)
    assert log.latest_epoch == 4
    assert log.append_as_leader(batch([b"c"]), 4, 1).first_offset == 20
    again.close()


def test_a_crash_without_close_loses_nothing_written(tmp_path: Path) -> None:
    manager, log = _open(tmp_path)
    append_n(log, 50, epoch=3)
    written = everything(log)
    # no close, no flush: what the OS has is what a kill -9 leaves
    again, recovered = _open(tmp_path)
    assert everything(recovered) == written
    assert recovered.log_end_offset == 50
    assert recovered.high_watermark == 0  # no checkpoint yet: the owner recomputes it
    assert recovered.end_offset_for_epoch(3) == (3, 50)
    again.close()
    manager.close()


def test_epochs_rederived_when_the_checkpoint_is_lost(tmp_path: Path) -> None:
    manager, log = _open(tmp_path)
    for epoch in (0, 2, 2, 5):
        log.append_as_leader(batch([b"x"]), epoch, 1)
    manager.close()
    (Path(str(log.dir)) / "leader-epoch-checkpoint").unlink()
    again, log = _open(tmp_path)
    assert log.end_offset_for_epoch(0) == (0, 1)
    assert log.end_offset_for_epoch(2) == (2, 3)
    assert log.latest_epoch == 5
    again.close()


def test_a_torn_tail_is_cut_at_the_last_whole_batch(tmp_path: Path) -> None:
    manager, log = _open(tmp_path)
    append_n(log, 5, epoch=1)
    sizes = [len(b) for b in _split(everything(log))]
    manager.close()
    (path,) = _segment_files(log)
    with path.open("r+b") as f:
        f.truncate(sum(sizes) - 7)  # the last batch half written
    again, log = _open(tmp_path)
    assert log.log_end_offset == 4
    assert path.stat().st_size == sum(sizes[:4])
    assert [b.base_offset for b in parse(everything(log))] == [0, 1, 2, 3]
    assert log.append_as_leader(batch([b"n"]), 1, 1).first_offset == 4
    again.close()


def test_a_corrupt_batch_cuts_the_log_there(tmp_path: Path) -> None:
    manager, log = _open(tmp_path, segment_bytes=500)
    append_n(log, 20, epoch=1)
    append_n(log, 5, epoch=2)
    manager.close()
    files = _segment_files(log)
    assert len(files) >= 3
    first = files[1]
    data = bytearray(first.read_bytes())
    second_batch = 12 + int.from_bytes(data[8:12], "big")
    data[second_batch + 40] ^= 0x55  # inside the CRC-covered bytes of its second batch
    first.write_bytes(bytes(data))
    base = int(first.name[:20])
    again, log = _open(tmp_path, segment_bytes=500)
    assert log.log_end_offset == base + 1  # its first batch stays
    assert _segment_files(log) == files[:2]  # every later segment is gone
    assert first.stat().st_size == second_batch
    assert log.latest_epoch == 1
    assert log.end_offset_for_epoch(1) == (1, base + 1)
    assert len(parse(everything(log))) == base + 1
    again.close()


def test_a_garbage_length_cuts_too(tmp_path: Path) -> None:
    manager, log = _open(tmp_path)
    append_n(log, 3)
    manager.close()
    (path,) = _segment_files(log)
    with path.open("ab") as f:
        f.write(b"\0" * 8 + (5).to_bytes(4, "big") + b"\0" * 60)  # a length below the header
    again, log = _open(tmp_path)
    assert log.log_end_offset == 3
    assert len(parse(everything(log))) == 3
    again.close()


def test_topic_id_kept_and_a_recreated_topic_starts_empty(tmp_path: Path) -> None:
    first_id, second_id = uuid.uuid4(), uuid.uuid4()
    manager = LogManager(str(tmp_path), 1 << 20)
    append_n(manager.get_or_create("t", 0, first_id, LogConfig()), 3)
    manager.close()
    manager = LogManager(str(tmp_path), 1 << 20)
    assert manager.load() == [("t", 0)]
    loaded = manager.get("t", 0)
    assert loaded is not None
    assert loaded.topic_id == first_id
    assert loaded.log_end_offset == 3
    assert manager.get_or_create("t", 0, first_id, LogConfig()) is loaded
    fresh = manager.get_or_create("t", 0, second_id, LogConfig())
    assert fresh is not loaded
    assert fresh.log_end_offset == 0
    assert fresh.topic_id == second_id
    manager.close()


def test_load_skips_what_is_not_a_partition_and_removes_half_deleted(tmp_path: Path) -> None:
    (tmp_path / "t-0.0123abcd-delete").mkdir()
    (tmp_path / "t-0.0123abcd-delete" / "00000000000000000000.log").write_bytes(batch([b"x"]))
    (tmp_path / "not a partition").mkdir()
    (tmp_path / "meta.properties").write_text("x")
    manager = LogManager(str(tmp_path), 1 << 20)
    assert manager.load() == []
    assert not (tmp_path / "t-0.0123abcd-delete").exists()
    manager.close()


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str = "1m") -> Iterator[Path]:
    where.mkdir()
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(root: Path, leave: int = 0) -> Path:
    """A ballast file taking all the room but ``leave`` bytes (to the page)."""
    ballast = root / "ballast"
    with ballast.open("wb", buffering=0) as f:
        room = os.statvfs(root).f_bavail * os.statvfs(root).f_frsize - leave
        with contextlib.suppress(OSError):
            while room > 0:
                room -= f.write(b"\0" * min(65536, room))
        if not leave:
            with contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * 512)
    return ballast


def _state(log: PartitionLog) -> tuple[int, int, int, bytes, list[int]]:
    sizes = [p.stat().st_size for p in _segment_files(log)]
    return log.log_end_offset, log.size_in_bytes, log.latest_epoch or -1, everything(log), sizes


def test_a_full_disk_fails_the_append_and_keeps_the_log(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "fs") as root:
        manager, log = _open(root / "logs", segment_bytes=64 * 1024)
        append_n(log, 10, epoch=1)  # ~80-byte batches: the segment's last page has room
        ballast = _fill(root)
        assert os.statvfs(root).f_bavail == 0
        before = _state(log)
        with pytest.raises(
            LogStorageError
        ) as caught:  # a new epoch: its checkpoint cannot be written
            log.append_as_leader(batch([b"new epoch"]), 2, 1)
        assert caught.value.error == ErrorCode.KAFKA_STORAGE_ERROR
        assert "leader-epoch-checkpoint" in str(
            caught.value
        )  # the batch itself was written: undone
        assert _state(log) == before
        with pytest.raises(LogStorageError, match="appending"):  # bigger than the page's room
            log.append_as_leader(sized(8000), 1, 1)
        assert _state(log) == before
        for _ in range(8):  # a roll: the new segment's file cannot take the batch
            with pytest.raises(LogStorageError):
                log.append_as_leader(sized(60_000), 1, 1)
        assert _state(log) == before
        assert len(_segment_files(log)) == 1
        ballast.unlink()  # room again: it works, and a restart sees exactly what was kept
        log.append_as_leader(batch([b"after"]), 2, 1)
        kept = _state(log)
        manager.close()
        again, log = _open(root / "logs", segment_bytes=64 * 1024)
        assert _state(log) == kept
        assert log.log_end_offset == 11
        assert log.latest_epoch == 2
        again.close()


def test_a_write_cut_short_by_a_full_disk_leaves_no_partial_batch(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "fs") as root:
        manager, log = _open(root / "logs")
        append_n(log, 3)
        _fill(root, leave=16 * 1024)
        before = _state(log)
        with pytest.raises(LogStorageError):
            log.append_as_leader(sized(100_000), 0, 1)  # part of it fits, then ENOSPC
        assert _state(log) == before
        append_n(log, 1)  # the next append lands where the failed one began
        assert [b.base_offset for b in parse(everything(log))] == [0, 1, 2, 3]
        manager.close()


def _split(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        size = 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
        out.append(data[pos : pos + size])
        pos += size
    return out


@contextlib.contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """No mount needed: this process may not grow any file past ``limit`` bytes (RLIMIT_FSIZE;
    a write beyond fails with EFBIG once SIGXFSZ is ignored), lifted again afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def test_a_write_past_the_file_size_limit_fails_and_keeps_the_log(tmp_path: Path) -> None:
    manager, log = _open(tmp_path)
    append_n(log, 3, epoch=1)
    before = _state(log)
    (path,) = _segment_files(log)
    with file_size_limit(path.stat().st_size + 50):
        with pytest.raises(LogStorageError) as caught:  # 50 bytes of it fit, then EFBIG
            log.append_as_leader(sized(200), 1, 1)
        assert "File too large" in str(caught.value)
        assert _state(log) == before
    append_n(log, 1, epoch=1)
    assert [b.base_offset for b in parse(everything(log))] == [0, 1, 2, 3]
    manager.close()


def test_a_partition_that_cannot_be_read_is_left_out_and_the_rest_loads(tmp_path: Path) -> None:
    manager = LogManager(str(tmp_path), 1 << 20)
    append_n(manager.get_or_create("good", 0, None, LogConfig()), 3)
    manager.close()
    (tmp_path / "bad-0" / "00000000000000000000.log").mkdir(parents=True)  # no file: a directory
    again = LogManager(str(tmp_path), 1 << 20)
    assert again.load() == [("good", 0)]
    assert [name for name, _ in again.load_errors] == ["bad-0"]
    with pytest.raises(LogStorageError) as caught:
        again.get_or_create("bad", 0, None, LogConfig())
    assert caught.value.error == ErrorCode.KAFKA_STORAGE_ERROR
    good = again.get("good", 0)
    assert good is not None
    assert good.log_end_offset == 3
    again.close()
