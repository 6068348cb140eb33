"""Producer state snapshot files (Kafka's ``<offset>.snapshot`` beside the segments,
``ProducerStateManager.writeSnapshot`` / ``readSnapshot``): the producers as they stood before
the batch at ``offset``, so recovery loads the latest one and replays the log from there only,
and a producer whose batches all went with retention is still known after a restart.

Kafka's format, version 1, big-endian::

    version int16 (1) | crc uint32 (CRC-32C of everything after it) |
    count int32 | count x (producer_id int64, epoch int16, last_sequence int32,
    last_offset int64, offset_delta int32, timestamp int64, coordinator_epoch int32,
    current_txn_first_offset int64)

Only a producer's last data batch is kept (its last sequence and offset, and ``offset_delta``
back to its first), as Kafka keeps it: after a restart a retry of that batch is a duplicate,
one of an older batch below the snapshot is not. A file is written to ``<name>.tmp``, fsynced,
then renamed (so a crash leaves the old file or the new one whole), owner-only as the segments.
A file that does not parse or whose CRC does not match is :class:`CorruptSnapshotError`: the
caller ignores it and rebuilds from the log.
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
from collections.abc import Callable, Iterable

from kmeta.log.checkpoints import private_opener
from kmeta.log.errors import LogStorageError
from kmeta.log.producer.producer_entry import INT32_MAX, NO_SEQUENCE, ProducerStateEntry
from kmeta.protocol.records.record_batch import crc32c

SNAPSHOT_SUFFIX = ".snapshot"
VERSION = 1
_HEAD = struct.Struct(">hI")  # version, crc
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
_NAME = re.compile(r"^(\d{20})\.snapshot$")


class CorruptSnapshotError(Exception):
    """Kafka's ``CorruptSnapshotException``."""


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def encode(entries: Iterable[ProducerStateEntry]) -> bytes:
    body = bytearray(_COUNT.size)
    count = 0
    for e in entries:
        batches = e.batches
        if batches:
            last = batches[-1]
            last_seq, last_offset = last.last_seq, last.last_offset
            delta, ts = last.last_offset - last.first_offset, last.timestamp
        else:  # (only a marker of this producer's so far)
            last_seq, last_offset, delta, ts = NO_SEQUENCE, -1, 0, e.last_timestamp
        body += _ENTRY.pack(
            e.producer_id, e.producer_epoch, last_seq, last_offset, delta, ts,
            e.coordinator_epoch, e.current_txn_first_offset,
        )  # fmt: skip
        count += 1
    _COUNT.pack_into(body, 0, count)
    return _HEAD.pack(VERSION, crc32c(body)) + bytes(body)


def decode(data: bytes) -> list[ProducerStateEntry]:
    """The entries of a snapshot's bytes, or CorruptSnapshotError."""
    if len(data) < _HEAD.size + _COUNT.size:
        raise CorruptSnapshotError(f"a snapshot of {len(data)} bytes is too short")
    version, crc = _HEAD.unpack_from(data)
    if version != VERSION:
        raise CorruptSnapshotError(f"snapshot version {version}, not {VERSION}")
    body = memoryview(data)[_HEAD.size :]
    if crc32c(body) != crc:
        raise CorruptSnapshotError(f"snapshot CRC {crc} does not match its contents' {crc32c(body)}")
    (count,) = _COUNT.unpack_from(body)
    if count < 0 or len(body) != _COUNT.size + count * _ENTRY.size:
        raise CorruptSnapshotError(f"{len(body)} bytes cannot hold {count} producer entries")
    entries = []
    for pid, epoch, last_seq, last_offset, delta, ts, coordinator_epoch, txn_first in _ENTRY.iter_unpack(
        body[_COUNT.size :]
    ):
        e = ProducerStateEntry(pid)
        e.producer_epoch, e.coordinator_epoch = epoch, coordinator_epoch
        e.current_txn_first_offset, e.last_timestamp = txn_first, ts
        if last_offset >= 0 and last_seq >= 0:
            first_seq = last_seq - delta if last_seq >= delta else last_seq - delta + INT32_MAX + 1
            e.add_batch(epoch, first_seq, last_seq, last_offset - delta, last_offset, ts)
        e.last_offset = max(last_offset, txn_first)
        entries.append(e)
    return entries


class ProducerSnapshotFiles:
    """The ``.snapshot`` files of one partition directory, by offset."""

    __slots__ = ("_ensure_dir", "dir", "offsets")

    def __init__(self, dir_path: str, ensure_dir: Callable[[], None]) -> None:
        self.dir = dir_path
        self._ensure_dir = ensure_dir
        self.offsets: list[int] = []
        if os.path.isdir(dir_path):
            self.offsets = sorted(
                int(m.group(1)) for m in map(_NAME.match, os.listdir(dir_path)) if m is not None
            )

    def path(self, offset: int) -> str:
        return os.path.join(self.dir, snapshot_file_name(offset))

    def write(self, offset: int, entries: Iterable[ProducerStateEntry]) -> None:
        """``takeSnapshot``: the state before ``offset``, replacing a file at that offset."""
        data = encode(entries)
        path = self.path(offset)
        tmp = path + ".tmp"
        self._ensure_dir()
        try:
            with open(tmp, "wb", opener=private_opener) as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise LogStorageError(f"Error while writing {path}: {exc}") from exc
        if offset not in self.offsets:
            self.offsets.append(offset)
            self.offsets.sort()

    def read(self, offset: int) -> list[ProducerStateEntry]:
        """The entries of the file at ``offset``; CorruptSnapshotError when it cannot be read."""
        try:
            with open(self.path(offset), "rb") as f:
                data = f.read()
        except OSError as exc:
            raise CorruptSnapshotError(f"cannot read {self.path(offset)}: {exc}") from exc
        return decode(data)

    def latest_at_or_below(self, offset: int) -> int | None:
        return next((o for o in reversed(self.offsets) if o <= offset), None)

    def delete(self, keep: Callable[[int], bool]) -> None:
        """Remove the files whose offset ``keep`` refuses."""
        for offset in [o for o in self.offsets if not keep(o)]:
            with contextlib.suppress(OSError):  # (a file left behind is only ignored later)
                os.unlink(self.path(offset))
            self.offsets.remove(offset)

    def discard(self, offset: int) -> None:
        self.delete(lambda o: o != offset)

    def delete_below(self, offset: int) -> None:
        """Those below ``offset`` (their segments went, Kafka's ``deleteSnapshotsBefore``)."""
        self.delete(lambda o: o >= offset)

    def delete_above(self, offset: int) -> None:
        """Those past ``offset`` (the log was cut there: they saw batches that are gone)."""
        self.delete(lambda o: o <= offset)
