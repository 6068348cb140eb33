"""Incremental splitter of Kafka's 4-byte length-prefixed frames.

A length that is negative or above ``max_frame_size`` (default 100 MiB, Kafka's
``socket.request.max.bytes``) raises FrameTooLargeError as soon as the 4-byte prefix is seen,
before any of the body is buffered.

A large frame (at least :data:`GATHER_FROM` bytes: a Produce of ~1 MiB batches, a Fetch
answer) arrives over several reads. It is gathered as the reads' own bytes objects and joined
once when whole: one copy into a bytes of the exact size, where the buffer took two (appended
to a growing bytearray, resized as it grows, then copied out) and the fresh pages of both
faulted in. Measured (issue 28): ``benchmarks/frame_split.py --vs-tree <main>``, four ~4 MB
frames in 256 KiB reads, CPU per MB of ``feed``: 0.18-0.26 ms gathered, 0.37-0.51 ms through
the bytearray (three runs, load 7-8); perf on the broker under ``benchmarks/data_plane.py``'s
produce put the two copies and their page faults at ~27 % of its cycles, the join at ~5 %.
"""

from __future__ import annotations

import struct

from kmeta.protocol.errors import FrameTooLargeError

DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024
#: a frame this long or longer that a read does not hold whole is gathered (module docstring)
GATHER_FROM = 64 * 1024
_SIZE = struct.Struct(">i")
#: what a gathered piece may be (kept as read, not copied, while the frame gathers)
Piece = bytes | memoryview


def _kept(data: bytes | bytearray | memoryview) -> Piece:
    """``data`` as a piece to hold until the frame is whole: bytes as they are, else a copy
    (a caller's bytearray may be reused after ``feed`` returns)."""
    if type(data) is bytes or (type(data) is memoryview and type(data.obj) is bytes):
        return data
    return bytes(data)


class FrameSplitter:
    __slots__ = ("_buf", "_need", "_parts", "buffered", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._buf = bytearray()
        #: the pieces of a large frame being gathered (None: not gathering), and bytes it lacks
        self._parts: list[Piece] | None = None
        self._need = 0
        self.max_frame_size = max_frame_size
        #: bytes held for a frame not yet complete (a plain attribute: read after every feed)
        self.buffered = 0

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Add bytes; return every frame they complete, in order (without the prefix).

        The common read of a request-response peer is exactly one whole frame: with nothing
        held, it is sliced out of ``data`` without passing through the buffer (one copy
        instead of three, and no buffer resize: 0.8-1.3 µs -> 0.3-0.55 µs per feed of a 47-byte
        frame, timeit at load ~5).
        """
        if self._parts is not None:
            return self._gather(data)
        buf = self._buf
        if not buf and type(data) is bytes and len(data) >= 4:
            size = _SIZE.unpack_from(data)[0]
            if size == len(data) - 4 and size <= self.max_frame_size:
                return [data[4:]]
            if GATHER_FROM <= size <= self.max_frame_size and size > len(data) - 4:
                return self._start(memoryview(data)[4:], size)  # a large frame's first read
        buf += data
        frames: list[bytes] = []
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0 or size > self.max_frame_size:
                buf.clear()
                self.buffered = 0
                raise FrameTooLargeError(
                    f"frame size {size} is outside 0..{self.max_frame_size}"
                )
            if end - pos - 4 < size:
                if size >= GATHER_FROM:  # (its start read with frames before it)
                    start = bytes(memoryview(buf)[pos + 4 :])
                    buf.clear()
                    return frames + self._start(start, size)
                break
            with memoryview(buf) as view:  # one copy (a slice of buf would be a second)
                frames.append(bytes(view[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        self.buffered = len(buf)
        return frames

    def _start(self, first: Piece, size: int) -> list[bytes]:
        """Gather a frame of ``size`` bytes, ``first`` its start (fewer bytes than size)."""
        self._parts = [first]
        self._need = size - len(first)
        self.buffered = 4 + len(first)
        return []

    def _gather(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        parts = self._parts
        assert parts is not None
        need, n = self._need, len(data)
        if n < need:
            parts.append(_kept(data))
            self._need = need - n
            self.buffered += n
            return []
        parts.append(memoryview(data)[:need])
        whole = b"".join(parts)  # (the one copy; the pieces are not held after it)
        self._parts, self._need, self.buffered = None, 0, 0
        if n == need:
            return [whole]
        return [whole, *self.feed(_kept(memoryview(data)[need:]))]


def frame(payload: bytes | bytearray) -> bytes:
    """Prefix ``payload`` with its length."""
    return _SIZE.pack(len(payload)) + payload
