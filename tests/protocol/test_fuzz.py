"""Arbitrary and mutated bytes only ever raise ProtocolError subclasses, and never hang.

Every decoder is fed: each API x version x direction (compiled and interpreted paths), the
request and response headers, and the frame splitter. Bounded in time: a few seconds in all.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kmeta.protocol.codec.schema import Message
from kmeta.protocol.errors import ProtocolError
from kmeta.protocol.framing import FrameSplitter
from kmeta.protocol.header import decode_request_header, decode_response_header
from tests.protocol.strategies import every_message_version, message_strategy

CASES = every_message_version()
FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)


def only_protocol_errors(fn: Callable[[], Any]) -> None:
    """Run ``fn``; a ProtocolError is a fine outcome, anything else fails the test."""
    with contextlib.suppress(ProtocolError):
        fn()


def decode_everywhere(message: Message, version: int, data: bytes) -> None:
    only_protocol_errors(lambda: message.decode(data, version))
    only_protocol_errors(lambda: message.decode(memoryview(data), version))
    only_protocol_errors(lambda: message.parse_interpreted(data, version))


@FUZZ
@given(case=st.sampled_from(CASES), data=st.binary(max_size=200))
def test_arbitrary_bytes_every_decoder(case: tuple[str, Message, int], data: bytes) -> None:
    _, message, version = case
    decode_everywhere(message, version, data)


def mutate(data: bytes, how: str, at: int, value: int) -> bytes:
    if not data:
        return data
    i = at % len(data)
    if how == "flip":
        return data[:i] + bytes([data[i] ^ (1 << (value % 8))]) + data[i + 1 :]
    if how == "truncate":
        return data[:i]
    if how == "byte":
        return data[:i] + bytes([value & 0xFF]) + data[i + 1 :]
    # "length": overwrite an int16/int32-sized window with a corrupt length or count
    width = 2 if value & 1 else 4
    fmt = ">h" if width == 2 else ">i"
    bad = (-1, -2, 0x7FFF, -(2**15))[value % 4] if width == 2 else (-1, -7, 2**31 - 1, 10**6)[value % 4]
    return data[:i] + struct.pack(fmt, bad) + data[i + width :]


@settings(FUZZ, max_examples=120)
@given(
    case=st.sampled_from(CASES),
    data=st.data(),
    how=st.sampled_from(["flip", "truncate", "byte", "length"]),
    at=st.integers(0, 10_000),
    value=st.integers(0, 255),
)
def test_mutated_valid_encodings(
    case: tuple[str, Message, int], data: st.DataObject, how: str, at: int, value: int
) -> None:
    _, message, version = case
    encoded = message.encode(data.draw(message_strategy(message, version)))
    decode_everywhere(message, version, mutate(encoded, how, at, value))


@pytest.mark.parametrize(("message", "version"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_truncation_and_byte_of_a_default_message(message: Message, version: int) -> None:
    """Deterministic sweep: every prefix, and every byte replaced by 0x00 / 0x7f / 0x80 / 0xff."""
    encoded = message.encode(message.cls(version=version))
    for i in range(len(encoded) + 1):
        decode_everywhere(message, version, encoded[:i])
        for b in (0x00, 0x7F, 0x80, 0xFF):
            decode_everywhere(message, version, encoded[:i] + bytes([b]) + encoded[i + 1 :])


@FUZZ
@given(data=st.binary(max_size=64))
def test_request_header_arbitrary_bytes(data: bytes) -> None:
    only_protocol_errors(lambda: decode_request_header(data))
    only_protocol_errors(lambda: decode_request_header(memoryview(data)))


@FUZZ
@given(
    head=st.sampled_from(
        [b"\x00\x03\x00\x0c", b"\x00\x03\x00\x01", b"\x00\x12\x00\x03", b"\x00\x07\x00\x00"]
    ),
    rest=st.binary(max_size=40),
)
def test_request_header_plausible_prefixes(head: bytes, rest: bytes) -> None:
    """Known api keys and versions, so the fuzzing reaches client id and tag parsing."""
    only_protocol_errors(lambda: decode_request_header(head + b"\x00\x00\x00\x01" + rest))


@FUZZ
@given(data=st.binary(max_size=32), version=st.sampled_from([0, 1]))
def test_response_header_arbitrary_bytes(data: bytes, version: int) -> None:
    only_protocol_errors(lambda: decode_response_header(data, version))


@settings(FUZZ, max_examples=100)
@given(
    chunks=st.lists(st.binary(max_size=24), max_size=12),
    max_size=st.integers(0, 64),
)
def test_frame_splitter_arbitrary_chunks(chunks: list[bytes], max_size: int) -> None:
    splitter = FrameSplitter(max_frame_size=max_size)
    total = 0
    for chunk in chunks:
        try:
            frames = splitter.feed(chunk)
        except ProtocolError:
            return
        assert all(len(f) <= max_size for f in frames)
        total += len(chunk)
        assert splitter.buffered <= total
        assert splitter.buffered < 4 + max_size  # never holds more than one frame's worth
