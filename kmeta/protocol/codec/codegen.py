"""The runtime of generated codecs: the source accumulator and the helpers emitted code calls.

:mod:`kmeta.protocol.codec.types` defines the wire format; each type there emits straight-line Python
into a :class:`Gen`, and :mod:`kmeta.protocol.codec.compiler` ``exec``s it. The emitted code inlines
the hot cases (one-byte compact lengths, fixed-width groups, int32 arrays) and calls the small
functions below for the rest: multi-byte varints, tag sections, UUIDs, errors. They live apart
from the types so that what the format *is* (types.py) reads separately from how the generated
code gets its speed (here and in :mod:`kmeta.protocol.codec.runs`).

Every helper that reads takes ``(buf, pos, end)`` and checks what it reads against ``end``; the
interpreted construct path uses the same varint and UTF-8 helpers, so both paths reject the same
bytes with the same :class:`CorruptMessageError`.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from kmeta.protocol.errors import CorruptMessageError


class Gen:
    """Accumulates generated source lines and the constants they reference."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1
        self.namespace: dict[str, Any] = dict(RUNTIME)
        self._counter = 0

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def tmp(self, stem: str = "v") -> str:
        self._counter += 1
        return f"{stem}{self._counter}"

    def const(self, value: Any, stem: str = "K") -> str:
        name = self.tmp(f"_{stem}")
        self.namespace[name] = value
        return name


# ---------------------------------------------------------------------------------------------
# Helpers that generated code calls (kept tiny; the hot cases are inlined).


def short_read(need: int, have: int) -> CorruptMessageError:
    return CorruptMessageError(f"needed {need} bytes but only {have} remain")


def read_uvarint(buf: Any, pos: int, end: int, max_bytes: int = 5) -> tuple[int, int]:
    """Unsigned LEB128 varint of at most ``max_bytes`` bytes (5 for 32-bit, 10 for 64-bit)."""
    value = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise short_read(1, 0)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            if value >> (32 if max_bytes == 5 else 64):
                raise CorruptMessageError("varint overflows its width")
            return value, pos
        shift += 7
    raise CorruptMessageError(f"varint longer than {max_bytes} bytes")


def uvarint_bytes(value: int) -> bytes:
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def zigzag_decode(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def zigzag_encode(value: int, bits: int) -> int:
    return ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)


def varint_bytes(value: int, bits: int, signed: bool) -> bytes:
    """A (zigzag) varint of ``bits`` width; out-of-range values raise instead of wrapping."""
    low, high = (-(1 << (bits - 1)), 1 << (bits - 1)) if signed else (0, 1 << bits)
    if not low <= value < high:
        raise ValueError(f"{value} does not fit a {bits}-bit {'' if signed else 'unsigned '}varint")
    return uvarint_bytes(zigzag_encode(value, bits) if signed else value)


_INT32S: dict[int, struct.Struct] = {}


def int32s(n: int) -> struct.Struct:
    """A cached ``struct.Struct`` for n big-endian int32s (arrays of broker ids)."""
    s = _INT32S.get(n)
    if s is None:
        s = struct.Struct(f">{n}i")
        if len(_INT32S) < 256:
            _INT32S[n] = s
    return s


def compact_len(buf: Any, pos: int, end: int, nullable: bool, what: str) -> tuple[int, int]:
    """Slow path of a compact length: multi-byte uvarint, or null (0)."""
    value, pos = read_uvarint(buf, pos, end)
    if value == 0 and not nullable:
        raise CorruptMessageError(f"non-nullable {what} is null")
    return value - 1, pos


def skip_tags(buf: Any, pos: int, end: int) -> int:
    """Skip a tag section whose fields are all unknown here; return the position after it."""
    count, pos = read_uvarint(buf, pos, end)
    if count > end - pos:
        raise short_read(count, end - pos)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        if size > end - pos:
            raise short_read(size, end - pos)
        pos += size
    return pos


_new_object = object.__new__
_set_attr = object.__setattr__
_UUID_UNKNOWN = uuid.SafeUUID.unknown


def uuid_at(buf: Any, pos: int) -> uuid.UUID:
    """``UUID(bytes=buf[pos:pos + 16])`` without UUID.__init__'s argument checks (2x faster)."""
    value = _new_object(uuid.UUID)
    _set_attr(value, "int", int.from_bytes(buf[pos : pos + 16]))
    _set_attr(value, "is_safe", _UUID_UNKNOWN)
    return value


#: bound ``unpack_from`` of n big-endian int32s for small n (replica lists), indexed by n
_I32_UNPACK = tuple(struct.Struct(f">{n}i").unpack_from for n in range(0x7F))
#: bound ``pack`` of n big-endian int32s for small n, indexed by n
_I32_PACK = tuple(struct.Struct(f">{n}i").pack for n in range(0x7F))


def int32_array_at(buf: Any, pos: int, end: int, n: int) -> tuple[int, ...]:
    """n int32s at ``pos``, n already known not to be negative."""
    if n * 4 > end - pos:
        raise short_read(n * 4, end - pos)
    return int32s(n).unpack_from(buf, pos)


def decode_utf8(raw: Any) -> str:
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptMessageError(f"string is not valid UTF-8: {exc}") from None


def parse_tagged(parse: Callable[[bytes], Any], buf: Any, pos: int, size: int) -> Any:
    try:
        return parse(bytes(buf[pos:pos + size]))
    except CorruptMessageError:
        raise
    except Exception as exc:  # construct's own errors, from the interpreted path
        raise CorruptMessageError(f"bad tagged field: {exc}") from None


def build_tags(tags: Sequence[tuple[int, Any, Any, Callable[[Any], bytes]]]) -> bytes:
    """The tag section: only values that differ from their default, in ascending tag order."""
    present = [(tag, build(value)) for tag, value, default, build in tags if value != default]
    out = bytearray(uvarint_bytes(len(present)))
    for tag, data in present:
        out += uvarint_bytes(tag) + uvarint_bytes(len(data)) + data
    return bytes(out)


RUNTIME: dict[str, Any] = {
    "_short": short_read,
    "_uvarint": read_uvarint,
    "_uvarint_bytes": uvarint_bytes,
    "_varint_bytes": varint_bytes,
    "_utf8": decode_utf8,
    "_int32s": int32s,
    "_tuple_new": tuple.__new__,
    "_UUID": uuid.UUID,
    "_Corrupt": CorruptMessageError,
    "_clen": compact_len,
    "_skip_tags": skip_tags,
    "_uuid_at": uuid_at,
    "_I32U": _I32_UNPACK,
    "_i32_array": int32_array_at,
    "_I32P": _I32_PACK,
    "_tagged": parse_tagged,
    "_build_tags": build_tags,
}
