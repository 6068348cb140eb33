"""Recovery of a partition's directory at start (Kafka's ``LogLoader``): every batch of every
segment walked and CRC-checked; at the first batch that is torn (a crash mid-append), corrupt
or out of order the segment file is cut there and every later segment deleted, as Kafka
recovers an unflushed log. A compacted log has gaps between batches and between segments; a
segment starting below the end of the one before it is what a cleaning left when it stopped
between swapping its merged segment in and deleting the ones merged (their records are in the
merged one, or were cleaned away): it goes, as do ``.cleaned`` files never swapped in (Kafka's
``.cleaned`` and ``.swap`` recovery). The leader-epoch cache is read back, topped up from the
batches' own epochs, and trimmed to the recovered offsets."""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import uuid
from collections.abc import Callable

from kmeta.log import checkpoints
from kmeta.log.epoch_cache import LeaderEpochFileCache
from kmeta.log.errors import LogStorageError
from kmeta.log.local_log import CLEANED_SUFFIX, LocalLog
from kmeta.log.record.batch import NO_EPOCH, last_offset, walk_batches
from kmeta.protocol.records.record_batch import BatchHeader

#: called with each recovered batch (the segment's bytes, its position, its header)
OnBatch = Callable[[memoryview, int, BatchHeader], None]

_SEGMENT = re.compile(r"^(\d{20})\.log$")


def recover(
    dir_path: str, local: LocalLog, epochs: LeaderEpochFileCache, on_batch: OnBatch | None = None
) -> tuple[int, int, uuid.UUID | None]:
    """Load ``dir_path`` into ``local`` and ``epochs``; returns (log start offset, high
    watermark, topic id) as the checkpoints and segments say. ``on_batch`` sees every batch
    kept, in order (the producer state is rebuilt from them)."""
    epochs.load()
    listed = os.listdir(dir_path)
    for name in listed:
        if name.endswith(CLEANED_SUFFIX):
            _unlink(os.path.join(dir_path, name))
    names = sorted(n for n in listed if _SEGMENT.match(n))
    stop = False
    for name in names:
        path = os.path.join(dir_path, name)
        if stop:
            _unlink(path)
            continue
        base = int(name[:20])
        if local.segments and base < local.log_end_offset:  # merged by a cleaning
            _unlink(path)
            continue
        stop = _recover_segment(path, base, local, epochs, on_batch)
    log_start = checkpoints.read_offset(dir_path, checkpoints.LOG_START_FILE) or 0
    if local.segments:
        log_start = max(log_start, local.segments[0].base_offset)
    if not local.segments or local.log_end_offset < log_start:
        for segment in local.segments:
            segment.delete()
        local.start_at(log_start)
    epochs.truncate_from_end(local.log_end_offset)
    epochs.truncate_from_start(log_start)
    hw = checkpoints.read_offset(dir_path, checkpoints.HIGH_WATERMARK_FILE) or log_start
    hw = min(max(hw, log_start), local.log_end_offset)
    return log_start, hw, checkpoints.read_partition_metadata(dir_path)


def _recover_segment(
    path: str, base: int, local: LocalLog, epochs: LeaderEpochFileCache, on_batch: OnBatch | None
) -> bool:
    """Walk one segment file into a LogSegment; True when it had to be cut."""
    segment = local.new_segment(base)
    try:
        with open(path, "rb") as f:
            stat = os.fstat(f.fileno())
            size = stat.st_size
            cut = size
            if size:
                with (
                    mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped,
                    memoryview(mapped) as view,
                ):
                    walked = walk_batches(view, base)
                    for pos, h in walked.batches:
                        segment.index_batch(pos, h)
                        if on_batch is not None:
                            on_batch(view, pos, h)
                        epoch = h.partition_leader_epoch
                        if epoch != NO_EPOCH and (
                            epochs.latest_epoch is None or epoch > epochs.latest_epoch
                        ):
                            epochs.assign(epoch, h.base_offset)
                cut = walked.valid_bytes
                if walked.batches:
                    segment.next_offset = last_offset(walked.batches[-1][1]) + 1
        if cut < size:
            os.truncate(path, cut)
    except OSError as exc:
        raise LogStorageError(f"Error while recovering {path}: {exc}") from exc
    segment.size = cut
    segment.last_modified_ms = int(stat.st_mtime * 1000)
    local.add_segment(segment)
    return cut < size


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
