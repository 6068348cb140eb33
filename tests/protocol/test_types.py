"""Kafka's primitives, both ways (parse and build) and both paths (interpreted and compiled).

The interpreted path is the construct itself (``T.parse`` / ``T.build``); the compiled path is
the code :mod:`kmeta.protocol.codec.compiler` generates for a one-field struct holding ``T``.
"""

from __future__ import annotations

import struct
import tracemalloc
import uuid
from collections import namedtuple
from typing import Any

import pytest
from construct import ConstructError

from kmeta.protocol.codec.compiler import Codec, compile_struct
from kmeta.protocol.codec.types import (
    ZERO_UUID,
    Bool,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    KafkaType,
    KArray,
    KBytes,
    KString,
    KStruct,
    TaggedField,
    UInt16,
    UInt32,
    Uuid,
    UVarint,
    UVarlong,
    Varint,
    Varlong,
)
from kmeta.protocol.errors import CorruptMessageError, ProtocolError

Box = namedtuple("Box", ["v"])


def compiled(t: KafkaType) -> Codec:
    return compile_struct(KStruct(Box, [("v", t, t.default)]), f"box of {t!r}")


def check(t: KafkaType, value: Any, data: bytes) -> None:
    """parse(data) == value and build(value) == data, interpreted and compiled."""
    assert t.parse(data) == value
    assert t.build(value) == data
    codec = compiled(t)
    box, end = codec.decode_from(data)
    assert box == Box(value)
    assert end == len(data)
    out = bytearray()
    codec.build_into(Box(value), out)
    assert bytes(out) == data


def rejects(t: KafkaType, data: bytes) -> None:
    """Both paths reject ``data`` with CorruptMessageError (the interpreted one may also use
    construct's own stream error for a plain short read, which Message maps)."""
    with pytest.raises(CorruptMessageError):
        compiled(t).decode_from(data)
    with pytest.raises((CorruptMessageError, ConstructError)):
        t.parse(data)


# -- fixed width ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "value", "data"),
    [
        (Int8, 0, b"\x00"),
        (Int8, -128, b"\x80"),
        (Int8, 127, b"\x7f"),
        (Int16, -1, b"\xff\xff"),
        (Int16, 0x1234, b"\x12\x34"),
        (Int16, -32768, b"\x80\x00"),
        (Int32, 1, b"\x00\x00\x00\x01"),
        (Int32, -2147483648, b"\x80\x00\x00\x00"),
        (Int32, 2147483647, b"\x7f\xff\xff\xff"),
        (Int64, -1, b"\xff" * 8),
        (Int64, 2**63 - 1, b"\x7f" + b"\xff" * 7),
        (UInt16, 65535, b"\xff\xff"),
        (UInt16, 9092, b"\x23\x84"),
        (UInt32, 2**32 - 1, b"\xff\xff\xff\xff"),
        (Float64, 1.5, b"\x3f\xf8" + b"\x00" * 6),
        (Float64, -0.0, b"\x80" + b"\x00" * 7),
        (Bool, True, b"\x01"),
        (Bool, False, b"\x00"),
    ],
)
def test_fixed_round_trip(t: KafkaType, value: Any, data: bytes) -> None:
    check(t, value, data)


@pytest.mark.parametrize("t", [Int8, Int16, Int32, Int64, UInt16, UInt32, Float64, Bool])
def test_fixed_truncated(t: KafkaType) -> None:
    rejects(t, b"\x01" * (t.min_size - 1))


@pytest.mark.parametrize(("t", "value"), [(Int8, 128), (Int16, -32769), (UInt16, -1), (UInt32, 2**32)])
def test_fixed_out_of_range_is_not_silently_wrapped(t: KafkaType, value: int) -> None:
    with pytest.raises(struct.error):
        compiled(t).build_into(Box(value), bytearray())


# -- varints ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "value", "data"),
    [
        (UVarint, 0, b"\x00"),
        (UVarint, 1, b"\x01"),
        (UVarint, 127, b"\x7f"),
        (UVarint, 128, b"\x80\x01"),
        (UVarint, 300, b"\xac\x02"),
        (UVarint, 2**32 - 1, b"\xff\xff\xff\xff\x0f"),  # the longest: 5 bytes
        (Varint, 0, b"\x00"),
        (Varint, -1, b"\x01"),
        (Varint, 1, b"\x02"),
        (Varint, -64, b"\x7f"),
        (Varint, 64, b"\x80\x01"),
        (Varint, 2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (Varint, -(2**31), b"\xff\xff\xff\xff\x0f"),
        (UVarlong, 2**64 - 1, b"\xff" * 9 + b"\x01"),  # the longest: 10 bytes
        (UVarlong, 2**35, b"\x80\x80\x80\x80\x80\x01"),
        (Varlong, -(2**63), b"\xff" * 9 + b"\x01"),
        (Varlong, 2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (Varlong, -3, b"\x05"),
    ],
)
def test_varint_round_trip(t: KafkaType, value: int, data: bytes) -> None:
    check(t, value, data)


@pytest.mark.parametrize(
    ("t", "data"),
    [
        (UVarint, b"\x80\x80\x80\x80\x80\x00"),  # 6 bytes: over-long for 32 bits
        (UVarint, b"\xff\xff\xff\xff\x1f"),  # 5 bytes but 35 bits: overflows
        (Varint, b"\xff\xff\xff\xff\x10"),
        (UVarlong, b"\x80" * 10 + b"\x00"),  # 11 bytes
        (UVarlong, b"\xff" * 9 + b"\x02"),  # 10 bytes but 65 bits
        (Varlong, b"\xff" * 9 + b"\x7f"),
        (UVarint, b"\x80\x80"),  # continuation bit with nothing after it
        (UVarint, b""),
    ],
)
def test_varint_over_long_or_overflowing_rejected(t: KafkaType, data: bytes) -> None:
    rejects(t, data)


@pytest.mark.parametrize(
    ("t", "value"), [(UVarint, -1), (UVarint, 2**32), (Varint, 2**31), (Varlong, -(2**63) - 1)]
)
def test_varint_build_out_of_range_raises(t: KafkaType, value: int) -> None:
    with pytest.raises(ValueError, match="does not fit"):
        t.build(value)
    with pytest.raises(ValueError, match="does not fit"):
        compiled(t).build_into(Box(value), bytearray())


# -- strings and bytes --------------------------------------------------------------------------

LONG = "x" * 200  # a compact length of 201 takes two uvarint bytes: c9 01


@pytest.mark.parametrize(
    ("t", "value", "data"),
    [
        (KString(), "", b"\x00\x00"),
        (KString(), "abc", b"\x00\x03abc"),
        (KString(), "é", b"\x00\x02\xc3\xa9"),  # the length counts UTF-8 bytes
        (KString(nullable=True), None, b"\xff\xff"),
        (KString(nullable=True), "a", b"\x00\x01a"),
        (KString(compact=True), "", b"\x01"),
        (KString(compact=True), "abc", b"\x04abc"),
        (KString(compact=True), LONG, b"\xc9\x01" + LONG.encode()),
        (KString(compact=True, nullable=True), None, b"\x00"),
        (KString(compact=True, nullable=True), "ab", b"\x03ab"),
        (KBytes(), b"", b"\x00\x00\x00\x00"),
        (KBytes(), b"\x00\xff", b"\x00\x00\x00\x02\x00\xff"),
        (KBytes(nullable=True), None, b"\xff\xff\xff\xff"),
        (KBytes(compact=True), b"\x01\x02", b"\x03\x01\x02"),
        (KBytes(compact=True, nullable=True), None, b"\x00"),
        (KBytes(compact=True, nullable=True), b"", b"\x01"),
    ],
)
def test_string_and_bytes_round_trip(t: KafkaType, value: Any, data: bytes) -> None:
    check(t, value, data)


@pytest.mark.parametrize(
    ("t", "data"),
    [
        (KString(), b"\xff\xff"),  # null for a non-nullable string
        (KString(compact=True), b"\x00"),
        (KString(), b"\xff\xfe"),  # -2: negative length
        (KString(nullable=True), b"\x80\x00"),  # -32768
        (KString(), b"\x00\x05abc"),  # longer than what is left
        (KString(compact=True), b"\x06abc"),
        (KString(), b"\x00\x02\xc3\x28"),  # not UTF-8
        (KString(), b"\x00"),  # truncated length
        (KBytes(), b"\xff\xff\xff\xff"),
        (KBytes(compact=True), b"\x00"),
        (KBytes(nullable=True), b"\xff\xff\xff\xfb"),  # -5
        (KBytes(), b"\x7f\xff\xff\xff" + b"\x00" * 6),  # 2 GiB claimed by a 10-byte frame
        (KBytes(compact=True), b"\xff\xff\xff\xff\x07" + b"\x00" * 5),
    ],
)
def test_string_and_bytes_bad_lengths_rejected(t: KafkaType, data: bytes) -> None:
    rejects(t, data)


def test_string_build_rejects_what_the_wire_cannot_carry() -> None:
    with pytest.raises(ValueError, match="32767"):
        KString().build("x" * 0x8000)
    with pytest.raises(ValueError, match="32767"):
        compiled(KString()).build_into(Box("x" * 0x8000), bytearray())
    with pytest.raises(ValueError, match="non-nullable"):
        KString().build(None)


# -- arrays -----------------------------------------------------------------------------------

Pair = namedtuple("Pair", ["a", "b"])
PAIR = KStruct(Pair, [("a", Int16, 0), ("b", KString(compact=True), "")])
INTS_130 = tuple(range(130))


@pytest.mark.parametrize(
    ("t", "value", "data"),
    [
        (KArray(Int32), (), b"\x00\x00\x00\x00"),
        (KArray(Int32), (1, -1), b"\x00\x00\x00\x02" + b"\x00\x00\x00\x01" + b"\xff" * 4),
        (KArray(Int32, nullable=True), None, b"\xff\xff\xff\xff"),
        (KArray(Int32, compact=True), (), b"\x01"),
        (KArray(Int32, compact=True), (7,), b"\x02\x00\x00\x00\x07"),
        (KArray(Int32, compact=True), INTS_130, b"\x83\x01" + struct.pack(">130i", *INTS_130)),
        (KArray(Int32, compact=True, nullable=True), None, b"\x00"),
        (KArray(Int16), (1, 2), b"\x00\x00\x00\x02\x00\x01\x00\x02"),
        (KArray(Int64, compact=True), (5,), b"\x02" + b"\x00" * 7 + b"\x05"),
        (KArray(KString()), ("a", ""), b"\x00\x00\x00\x02\x00\x01a\x00\x00"),
        (KArray(KString(compact=True), compact=True), ("ab",), b"\x02\x03ab"),
        (KArray(Uuid(), compact=True), (ZERO_UUID,), b"\x02" + b"\x00" * 16),
        (KArray(PAIR, compact=True), (Pair(1, "x"), Pair(-1, "")), b"\x03\x00\x01\x02x\xff\xff\x01"),
    ],
)
def test_array_round_trip(t: KafkaType, value: Any, data: bytes) -> None:
    check(t, value, data)


def test_decoded_arrays_are_tuples() -> None:
    codec = compiled(KArray(Int32, compact=True))
    box, _ = codec.decode_from(b"\x03\x00\x00\x00\x01\x00\x00\x00\x02")
    assert type(box.v) is tuple
    assert type(KArray(KString()).parse(b"\x00\x00\x00\x01\x00\x01a")) is tuple


@pytest.mark.parametrize(
    ("t", "data"),
    [
        (KArray(Int32), b"\xff\xff\xff\xff"),  # null for a non-nullable array
        (KArray(Int32, compact=True), b"\x00"),
        (KArray(Int32), b"\xff\xff\xff\xf9"),  # -7
        (KArray(Int32, nullable=True), b"\x80\x00\x00\x00"),
        (KArray(Int32), b"\x00\x00\x00\x02\x00\x00\x00\x01"),  # second element missing
        (KArray(Int32, compact=True), b"\x03\x00\x00\x00\x01"),
        (KArray(PAIR, compact=True), b"\x02\x00\x01"),
    ],
)
def test_array_bad_counts_rejected(t: KafkaType, data: bytes) -> None:
    rejects(t, data)


# -- uuid -------------------------------------------------------------------------------------


def test_uuid_round_trip() -> None:
    u = uuid.UUID("0123456789abcdef0123456789abcdef")
    check(Uuid(), u, u.bytes)
    check(Uuid(), ZERO_UUID, b"\x00" * 16)
    box, _ = compiled(Uuid()).decode_from(u.bytes)
    assert isinstance(box.v, uuid.UUID)
    assert box.v.hex == u.hex
    assert hash(box.v) == hash(u)
    rejects(Uuid(), b"\x00" * 15)


# -- tagged fields ------------------------------------------------------------------------------

Tagged = namedtuple("Tagged", ["a", "b", "c"])
TAGGED = KStruct(
    Tagged,
    [("a", Int32, 0), ("b", None, 0), ("c", None, "")],
    # given out of order on purpose: the struct writes them in ascending tag order
    tagged=[TaggedField(2, "c", 5, KString(compact=True), ""), TaggedField(1, "b", 0, Int32, 0)],
    flexible=True,
)


@pytest.mark.parametrize(
    ("value", "data"),
    [
        (Tagged(7, 0, ""), b"\x00\x00\x00\x07\x00"),  # all defaults: no tags written
        (Tagged(7, 9, ""), b"\x00\x00\x00\x07\x01" + b"\x00\x04\x00\x00\x00\x09"),
        (Tagged(7, 0, "hi"), b"\x00\x00\x00\x07\x01" + b"\x05\x03\x03hi"),
        (
            Tagged(7, 9, "hi"),
            b"\x00\x00\x00\x07\x02" + b"\x00\x04\x00\x00\x00\x09" + b"\x05\x03\x03hi",
        ),
    ],
)
def test_tagged_fields_round_trip(value: Tagged, data: bytes) -> None:
    check(TAGGED, value, data)


def test_unknown_tags_are_skipped() -> None:
    data = (
        b"\x00\x00\x00\x07\x04"
        + b"\x00\x04\x00\x00\x00\x09"  # tag 0 (b) = 9
        + b"\x03\x02\xaa\xbb"  # tag 3: unknown, 2 bytes
        + b"\x05\x03\x03hi"  # tag 5 (c) = "hi"
        + b"\x81\x01\x00"  # tag 129: unknown, empty
        + b"tail"  # bytes after the struct are not ours
    )
    want = Tagged(7, 9, "hi")
    assert TAGGED.parse(data) == want
    box, end = compiled(TAGGED).decode_from(data)
    assert box.v == want
    assert end == len(data) - 4


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x00\x00\x07\x01\x00\x09\x00",  # tag 0 claims 9 bytes, 1 left
        b"\x00\x00\x00\x07\xff\xff\xff\xff\x0f",  # 4 billion tags in 0 bytes
        b"\x00\x00\x00\x07\x01\x00",  # size missing
        b"\x00\x00\x00\x07\x01\x00\x02\x00\x00",  # tag 0 is an int32 but only 2 bytes long
        b"\x00\x00\x00\x07",  # tag section missing altogether
    ],
)
def test_bad_tag_sections_rejected(data: bytes) -> None:
    rejects(TAGGED, data)


# -- bounds before allocation ---------------------------------------------------------------------

HUGE_COUNT_FRAMES = [
    (KArray(Int32), struct.pack(">i", 1_000_000) + b"\x00" * 6),
    (KArray(Int32, compact=True), b"\xc1\x84\x3d" + b"\x00" * 7),  # uvarint 1_000_001
    (KArray(KString()), struct.pack(">i", 1_000_000) + b"\x00" * 6),
    (KArray(PAIR, compact=True), b"\xc1\x84\x3d" + b"\x00" * 7),
    (KArray(KArray(Int8)), struct.pack(">i", 2**31 - 1) + b"\x00" * 6),
    (KString(), b"\x7f\xff" + b"a" * 8),
    (KBytes(), b"\x00\x0f\x42\x40" + b"\x00" * 6),
    (KBytes(compact=True), b"\xc1\x84\x3d" + b"\x00" * 7),
]


@pytest.mark.parametrize(("t", "data"), HUGE_COUNT_FRAMES)
def test_ten_byte_frame_cannot_claim_a_million_elements(t: KafkaType, data: bytes) -> None:
    assert len(data) == 10
    codec = compiled(t)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptMessageError, match="remain"):
            codec.decode_from(data)
        with pytest.raises(CorruptMessageError, match="remain"):
            t.parse(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024  # nothing near a million elements was ever allocated


def test_corrupt_message_error_is_a_protocol_error() -> None:
    assert issubclass(CorruptMessageError, ProtocolError)
