"""FrameSplitter: incremental 4-byte length-prefixed frames with a bounded size."""

from __future__ import annotations

import struct

import pytest

from kmeta.protocol.errors import FrameTooLargeError, ProtocolError
from kmeta.protocol.framing import DEFAULT_MAX_FRAME_SIZE, GATHER_FROM, FrameSplitter, frame

PAYLOADS = [b"", b"a", b"hello world", bytes(range(256)) * 3]


def test_frame_prefixes_length() -> None:
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame(b"") == b"\x00\x00\x00\x00"


def test_byte_by_byte() -> None:
    stream = b"".join(frame(p) for p in PAYLOADS)
    splitter = FrameSplitter()
    out: list[bytes] = []
    for i in range(len(stream)):
        out += splitter.feed(stream[i : i + 1])
    assert out == PAYLOADS
    assert splitter.buffered == 0


def test_many_frames_per_feed_and_split_across_feeds() -> None:
    stream = b"".join(frame(p) for p in PAYLOADS * 50)
    splitter = FrameSplitter()
    assert splitter.feed(stream) == PAYLOADS * 50
    cut = len(frame(b"")) + len(frame(b"a")) + 3  # two whole frames, then 3 bytes of a prefix
    first, second = stream[:cut], stream[cut:]
    assert splitter.feed(memoryview(first)) == [b"", b"a"]
    assert splitter.buffered == 3
    assert splitter.feed(bytearray(second)) == (PAYLOADS * 50)[2:]
    assert splitter.buffered == 0


def test_partial_frame_is_held() -> None:
    splitter = FrameSplitter()
    assert splitter.feed(b"\x00\x00\x00\x05ab") == []
    assert splitter.buffered == 6
    assert splitter.feed(b"cde\x00\x00") == [b"abcde"]
    assert splitter.buffered == 2


@pytest.mark.parametrize("size", [-1, -(2**31), DEFAULT_MAX_FRAME_SIZE + 1])
def test_bad_length_raised_on_the_prefix_alone(size: int) -> None:
    splitter = FrameSplitter()
    with pytest.raises(FrameTooLargeError):
        splitter.feed(struct.pack(">i", size))  # no body byte has arrived
    assert splitter.buffered == 0


def test_bad_length_raised_before_the_body_when_prefix_arrives_in_pieces() -> None:
    splitter = FrameSplitter(max_frame_size=1000)
    assert splitter.feed(b"\x00\x00") == []
    with pytest.raises(FrameTooLargeError):
        splitter.feed(b"\x03\xe9")  # 1001
    assert splitter.buffered == 0


def test_bad_length_after_good_frames_in_the_same_feed() -> None:
    splitter = FrameSplitter(max_frame_size=10)
    with pytest.raises(FrameTooLargeError):
        splitter.feed(frame(b"ok") + struct.pack(">i", 11) + b"x" * 11)


def test_max_size_is_configurable_and_inclusive() -> None:
    splitter = FrameSplitter(max_frame_size=10)
    assert splitter.feed(frame(b"x" * 10)) == [b"x" * 10]
    with pytest.raises(FrameTooLargeError, match=r"0\.\.10"):
        splitter.feed(frame(b"x" * 11))


def test_default_max_is_100_mib() -> None:
    assert DEFAULT_MAX_FRAME_SIZE == 100 * 1024 * 1024
    assert FrameSplitter().max_frame_size == 100 * 1024 * 1024
    splitter = FrameSplitter()
    assert splitter.feed(struct.pack(">i", DEFAULT_MAX_FRAME_SIZE)) == []  # accepted, waiting
    assert splitter.buffered == 4


def test_frame_too_large_is_a_protocol_error() -> None:
    assert issubclass(FrameTooLargeError, ProtocolError)


def _reads(stream: bytes, step: int) -> list[bytes]:
    return [stream[i : i + step] for i in range(0, len(stream), step)]


@pytest.mark.parametrize("step", [1000, GATHER_FROM - 1, GATHER_FROM + 7, 256 * 1024, 3 << 20])
def test_large_frames_gathered_across_reads_with_small_ones_between(step: int) -> None:
    large = [bytes([i]) * (GATHER_FROM + i * 40_000) for i in range(1, 5)]
    payloads = [b"a", large[0], large[1], b"", b"bc", large[2], b"d" * 300, large[3], b"e"]
    stream = b"".join(frame(p) for p in payloads)
    splitter = FrameSplitter()
    out: list[bytes] = []
    for piece in _reads(stream, step):
        out += splitter.feed(piece)
        assert all(type(f) is bytes for f in out)
    assert out == payloads
    assert splitter.buffered == 0


def test_a_gathered_frame_counts_what_it_holds_and_keeps_no_reused_buffer() -> None:
    payload = bytes(range(256)) * (GATHER_FROM // 256 + 10)
    stream = frame(payload) + frame(b"next")
    splitter = FrameSplitter()
    reused = bytearray(stream[:1000])
    assert splitter.feed(reused) == []
    assert splitter.buffered == 1000
    reused[:] = b"\xff" * 1000  # the caller's buffer, rewritten after feed returned
    middle = memoryview(bytearray(stream[1000:-20]))
    assert splitter.feed(middle) == []
    assert splitter.buffered == len(stream) - 20
    middle[:] = b"\xfe" * len(middle)
    assert splitter.feed(stream[-20:]) == [payload, b"next"]
    assert splitter.buffered == 0


def test_a_large_frame_too_long_is_refused_on_its_prefix() -> None:
    splitter = FrameSplitter(max_frame_size=GATHER_FROM)
    with pytest.raises(FrameTooLargeError):
        splitter.feed(struct.pack(">i", GATHER_FROM + 1) + b"x" * 100)
    assert splitter.feed(frame(b"x" * 1000)[:500]) == []
    assert splitter.buffered == 500
