"""Where a segment's bytes live: a growing bytearray (memory mode) or a file written at known
positions (with a log dir). Both present the same five operations to :class:`LogSegment`;
a failed write leaves the bytes as they were and raises :class:`LogStorageError`."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Sequence

from kmeta.log.errors import LogStorageError
from kmeta.log.record.batch import HEADER, Buffer
from kmeta.protocol.records.record_batch import BatchHeader


class MemoryAccount:
    """Bytes held in memory by every memory-mode segment of a LogManager (one counter the
    segments update, so checking the broker-wide cap after an append costs nothing), and the
    size memory-mode segments roll at, at most (so the cap can free part of a log).
    ``full``: the last enforcement of the cap (``limit``) could not get under it, so appends
    that would grow past it are refused until something frees memory."""

    __slots__ = ("bytes", "full", "limit", "max_segment_bytes")

    def __init__(self, max_segment_bytes: int = 1 << 62, limit: int = 1 << 62) -> None:
        self.bytes = 0
        self.max_segment_bytes = max_segment_bytes
        self.limit = limit
        self.full = False


class MemoryStore:
    """A segment's bytes in one bytearray. While the segment is active, reads copy: a live
    view would forbid the bytearray to grow on the next append (BufferError). Once it rolls
    it is sealed: never resized or changed in place again (a truncation or deletion swaps in
    a new bytearray), so reads hand out views of it, zero-copy and valid for as long as the
    caller keeps them."""

    __slots__ = ("_account", "_buf", "_sealed")

    def __init__(self, account: MemoryAccount | None) -> None:
        self._buf = bytearray()
        self._account = account
        self._sealed = False

    def write(self, pos: int, data: Buffer, prefix: bytes | None) -> None:
        self._buf += data
        if prefix:  # same length: no resize, so the slice assignment is in place
            self._buf[pos : pos + len(prefix)] = prefix
        if self._account is not None:
            self._account.bytes += len(data)

    def read(self, pos: int, size: int) -> bytes | memoryview:
        if self._sealed:
            return memoryview(self._buf)[pos : pos + size]
        with memoryview(self._buf) as view:
            return bytes(view[pos : pos + size])

    def header(self, pos: int) -> BatchHeader:
        return BatchHeader(*HEADER.unpack_from(self._buf, pos))

    def seal(self) -> None:
        self._sealed = True

    def unseal(self) -> None:
        """Appendable again (a truncation left a closed segment last): a new buffer, since
        views of the sealed one may be out."""
        if self._sealed:
            self._buf, self._sealed = bytearray(self._buf), False

    def truncate(self, pos: int) -> None:
        if self._account is not None:
            self._account.bytes -= len(self._buf) - pos
        if self._sealed:  # views may be out: a new buffer (active again, so unsealed)
            self._buf, self._sealed = self._buf[:pos], False
        else:
            del self._buf[pos:]

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def delete(self) -> None:
        if self._account is not None:
            self._account.bytes -= len(self._buf)
        self._buf = bytearray()


class FileStore:
    """A segment file ``<dir>/<base offset:020d>.log``, opened (and created) at its first
    write, written with ``pwritev`` at the position the segment tracks, never fsynced per
    write: :meth:`flush` does that (Kafka's flush.messages default leaves it to the OS)."""

    __slots__ = ("_dirty", "_ensure_dir", "_fd", "_window", "_window_pos", "path")

    _WINDOW = 8192  # header reads come from one pread of this much

    def __init__(self, path: str, ensure_dir: Callable[[], None]) -> None:
        self.path = path
        self._ensure_dir = ensure_dir
        self._fd: int | None = None
        self._dirty = False
        self._window = b""
        self._window_pos = 0

    def _open(self) -> int:
        if self._fd is None:
            self._ensure_dir()
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        return self._fd

    def write(self, pos: int, data: Buffer, prefix: bytes | None) -> None:
        self._window = b""
        parts: Sequence[Buffer] = [prefix, memoryview(data)[len(prefix) :]] if prefix else [data]
        total = len(data)
        fd: int | None = None
        try:
            fd = self._open()
            done = os.pwritev(fd, parts, pos)
            if done < total:  # a short write: the rest byte for byte, or the error it hits
                whole = memoryview(b"".join(parts))
                while done < total:
                    n = os.pwrite(fd, whole[done:], pos + done)
                    if n == 0:
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                    done += n
        except OSError as exc:
            if fd is not None:
                with contextlib.suppress(OSError):  # shrinking a file needs no space
                    os.ftruncate(fd, pos)
            raise LogStorageError(f"Error while appending to {self.path}: {exc}") from exc
        self._dirty = True

    def create(self) -> None:
        """The file, even with nothing written (an empty cleaned segment)."""
        try:
            self._open()
        except OSError as exc:
            raise LogStorageError(f"Error while creating {self.path}: {exc}") from exc

    def read(self, pos: int, size: int) -> bytes:
        try:
            return os.pread(self._open(), size, pos)
        except OSError as exc:
            raise LogStorageError(f"Error while reading {self.path}: {exc}") from exc

    def header(self, pos: int) -> BatchHeader:
        at = pos - self._window_pos
        if at < 0 or at + HEADER.size > len(self._window):
            self._window = self.read(pos, self._WINDOW)
            self._window_pos, at = pos, 0
        return BatchHeader(*HEADER.unpack_from(self._window, at))

    def seal(self) -> None:
        pass

    def unseal(self) -> None:
        pass

    def truncate(self, pos: int) -> None:
        self._window = b""
        try:
            os.ftruncate(self._open(), pos)
        except OSError as exc:
            raise LogStorageError(f"Error while truncating {self.path}: {exc}") from exc
        self._dirty = True

    def flush(self) -> None:
        if self._dirty and self._fd is not None:
            try:
                os.fsync(self._fd)
            except OSError as exc:
                raise LogStorageError(f"Error while flushing {self.path}: {exc}") from exc
            self._dirty = False

    def close(self) -> None:
        """Close the descriptor (reopened by the next read or write)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        self._window = b""

    def delete(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
