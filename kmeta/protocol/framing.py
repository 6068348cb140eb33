"""Incremental splitter of Kafka's 4-byte length-prefixed frames.

A length that is negative or above ``max_frame_size`` (default 100 MiB, Kafka's
``socket.request.max.bytes``) raises FrameTooLargeError as soon as the 4-byte prefix is seen,
before any of the body is buffered.
"""

from __future__ import annotations

import struct

from kmeta.protocol.errors import FrameTooLargeError

DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024
_SIZE = struct.Struct(">i")


class FrameSplitter:
    __slots__ = ("_buf", "buffered", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._buf = bytearray()
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
        buf = self._buf
        if not buf and type(data) is bytes and len(data) >= 4:
            size = _SIZE.unpack_from(data)[0]
            if size == len(data) - 4 and size <= self.max_frame_size:
                return [data[4:]]
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
                break
            with memoryview(buf) as view:  # one copy (a slice of buf would be a second)
                frames.append(bytes(view[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        self.buffered = len(buf)
        return frames


def frame(payload: bytes | bytearray) -> bytes:
    """Prefix ``payload`` with its length."""
    return _SIZE.pack(len(payload)) + payload
