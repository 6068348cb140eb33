"""Kafka's wire primitives, defined once, as construct ``Construct`` subclasses.

int8..int64, uint16/32, float64, bool, (unsigned) varints and varlongs, uuid, and the
length-prefixed string, bytes and array types in their classic and compact forms. Structs and
tag sections are in :mod:`kmeta.protocol.types`, which also re-exports everything here.

Each primitive has two faces that must agree byte for byte (tests check it):

* the interpreted construct path (``_parse`` / ``_build``), which is the definition of the
  format and what a plain ``construct.Struct`` of these types would do;
* an emitter (``emit_parse`` / ``emit_build``) that writes straight-line Python for
  :mod:`kmeta.protocol.compiler`. Stock compiled construct drops bounds checks; these emitters
  keep every one of them, because the compiled code parses untrusted bytes.

Every length or count read from the wire is checked against the bytes left before anything is
allocated: a count of N elements needs at least N * ``min_size`` bytes to follow, so a 10-byte
frame can never build a million-element list. Generated parsers read ``buf`` up to ``end ==
len(buf)``: fixed-width reads lean on ``unpack_from``'s and indexing's own bounds checks (their
``struct.error`` / ``IndexError`` become CorruptMessageError in ``Codec.decode_from``), while
every count and length that would size an allocation or a slice is checked explicitly. Decoded
arrays are tuples: decoded messages are immutable values that caches may keep as they are.
"""

from __future__ import annotations

import abc
import io
import struct
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from construct import Construct, stream_read, stream_write

from kmeta.protocol.codegen import (
    Gen,
    decode_utf8,
    read_uvarint,
    short_read,
    uvarint_bytes,
    varint_bytes,
    zigzag_decode,
)
from kmeta.protocol.errors import CorruptMessageError

ZERO_UUID = uuid.UUID(int=0)


def remaining(stream: io.IOBase) -> int:
    here = stream.tell()
    end = stream.seek(0, io.SEEK_END)
    stream.seek(here)
    return end - here


def read_uvarint_stream(stream: io.IOBase, path: str, max_bytes: int = 5) -> int:
    raw = bytearray()
    while True:
        b = stream_read(stream, 1, path)[0]
        raw.append(b)
        if not b & 0x80 or len(raw) >= max_bytes:
            break
    value, _ = read_uvarint(bytes(raw), 0, len(raw), max_bytes)
    return value


class KafkaType(Construct, metaclass=abc.ABCMeta):  # type: ignore[misc]
    """Base of every Kafka primitive: a construct plus a fast-path emitter."""

    #: fewest bytes one value can take on the wire; bounds array counts
    min_size = 1
    #: ``struct`` format character for fixed-width types, which the compiler groups
    fmt: str | None = None
    default: Any = None

    @abc.abstractmethod
    def emit_parse(self, g: Gen, target: str) -> None:
        """Emit code that reads one value into ``target`` and advances ``pos``."""

    @abc.abstractmethod
    def emit_build(self, g: Gen, expr: str) -> None:
        """Emit code that appends the encoding of ``expr`` to ``out``."""

    def emit_parse_items(self, g: Gen, target: str, n: str) -> None:
        """Emit the decoding of ``n`` consecutive values (n already bounds-checked) into the
        tuple ``target``: one after the other here; structs may do better."""
        items, item = g.tmp("items"), g.tmp("item")
        g.line(f"{items} = []")
        g.line(f"for _ in range({n}):")
        g.depth += 1
        self.emit_parse(g, item)
        g.line(f"{items}.append({item})")
        g.depth -= 1
        g.line(f"{target} = tuple({items})")

    def emit_build_items(self, g: Gen, expr: str) -> None:
        """Emit the encoding of every value of the sequence ``expr``, in order."""
        item = g.tmp("item")
        g.line(f"for {item} in {expr}:")
        g.depth += 1
        self.emit_build(g, item)
        g.depth -= 1


class Fixed(KafkaType):
    """int8/16/32/64, uint16/32, float64 and bool: fixed width, big-endian."""

    def __init__(self, name: str, fmt: str, default: Any = 0) -> None:
        super().__init__()
        self.name = name
        self.fmt = fmt
        self.default = default
        self._struct = struct.Struct(">" + fmt)
        self.min_size = self._struct.size

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        return self._struct.unpack(stream_read(stream, self.min_size, path))[0]

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        stream_write(stream, self._struct.pack(obj), self.min_size, path)
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        return self.min_size

    def emit_parse(self, g: Gen, target: str) -> None:
        unpack = g.const(self._struct.unpack_from, "unpack")  # raises struct.error past end
        g.line(f"{target}, = {unpack}(buf, pos); pos += {self.min_size}")

    def emit_build(self, g: Gen, expr: str) -> None:
        g.line(f"out += {g.const(self._struct.pack, 'pack')}({expr})")

    def __repr__(self) -> str:
        return self.name


Int8 = Fixed("int8", "b")
Int16 = Fixed("int16", "h")
Int32 = Fixed("int32", "i")
Int64 = Fixed("int64", "q")
UInt16 = Fixed("uint16", "H")
UInt32 = Fixed("uint32", "I")
Float64 = Fixed("float64", "d", 0.0)
Bool = Fixed("bool", "?", False)


class _Varint(KafkaType):
    def __init__(self, name: str, max_bytes: int, signed: bool) -> None:
        super().__init__()
        self.name, self.max_bytes, self.signed = name, max_bytes, signed
        self.default = 0
        self.bits = 32 if max_bytes == 5 else 64

    def _parse(self, stream: Any, context: Any, path: str) -> int:
        value = read_uvarint_stream(stream, path, self.max_bytes)
        return zigzag_decode(value) if self.signed else value

    def _build(self, obj: int, stream: Any, context: Any, path: str) -> int:
        raw = varint_bytes(obj, self.bits, self.signed)
        stream_write(stream, raw, len(raw), path)
        return obj

    def emit_parse(self, g: Gen, target: str) -> None:
        g.line(f"{target}, pos = _uvarint(buf, pos, end, {self.max_bytes})")
        if self.signed:
            g.line(f"{target} = ({target} >> 1) ^ -({target} & 1)")

    def emit_build(self, g: Gen, expr: str) -> None:
        g.line(f"out += _varint_bytes({expr}, {self.bits}, {self.signed})")

    def __repr__(self) -> str:
        return self.name


UVarint = _Varint("uvarint", 5, signed=False)
Varint = _Varint("varint", 5, signed=True)
UVarlong = _Varint("uvarlong", 10, signed=False)
Varlong = _Varint("varlong", 10, signed=True)


class Uuid(KafkaType):
    """16 bytes, decoded as ``uuid.UUID``; the all-zero id is Kafka's "no id"."""

    min_size = 16
    default = ZERO_UUID

    def _parse(self, stream: Any, context: Any, path: str) -> uuid.UUID:
        return uuid.UUID(bytes=stream_read(stream, 16, path))

    def _build(self, obj: uuid.UUID, stream: Any, context: Any, path: str) -> uuid.UUID:
        stream_write(stream, obj.bytes, 16, path)
        return obj

    def emit_parse(self, g: Gen, target: str) -> None:
        g.line("if end - pos < 16: raise _short(16, end - pos)")
        g.line(f"{target} = _uuid_at(buf, pos); pos += 16")

    def emit_build(self, g: Gen, expr: str) -> None:
        g.line(f"out += {expr}.int.to_bytes(16)")  # UUID.bytes is a Python-level property

    def __repr__(self) -> str:
        return "uuid"


# ---------------------------------------------------------------------------------------------
# Length-prefixed types. ``compact`` means a uvarint N+1 prefix (0 is null) as used from the
# flexible versions on; otherwise an int16 (strings) or int32 (bytes, arrays) prefix, -1 is null.


class _Prefixed(KafkaType):
    """Shared length handling of strings, bytes and arrays."""

    unit = 1  # bytes per counted item, for the bounds check
    what = "value"

    def __init__(self, compact: bool, nullable: bool, wide: bool) -> None:
        super().__init__()
        self.compact, self.nullable = compact, nullable
        self._len = Int32 if wide else Int16
        self.min_size = 1 if compact else self._len.min_size

    # interpreted ---------------------------------------------------------------------------
    def _read_len(self, stream: Any, path: str) -> int | None:
        n = read_uvarint_stream(stream, path) - 1 if self.compact else self._len._parse(stream, None, path)
        if n < 0:
            if n < -1 and not self.compact:
                raise CorruptMessageError(f"negative {self.what} length {n}")
            if not self.nullable:
                raise CorruptMessageError(f"non-nullable {self.what} is null")
            return None
        if n * self.unit > remaining(stream):
            raise short_read(n * self.unit, remaining(stream))
        return n

    def _write_len(self, n: int | None, stream: Any, path: str) -> None:
        if n is None and not self.nullable:
            raise ValueError(f"non-nullable {self.what} given None")
        value = -1 if n is None else n
        if self.compact:
            raw = uvarint_bytes(value + 1)
            stream_write(stream, raw, len(raw), path)
        else:
            self._len._build(value, stream, None, path)

    # emitted -------------------------------------------------------------------------------
    def emit_len(self, g: Gen, n: str) -> None:
        """Emit code leaving the count in ``n`` (-1 for null), bounds already checked."""
        if self.compact:
            # one byte 1..127 is the common case; null and multi-byte lengths take the slow path
            g.line(f"{n} = buf[pos] - 1; pos += 1")
            g.line(
                f"if not 0 <= {n} < 0x7F: "
                f"{n}, pos = _clen(buf, pos - 1, end, {self.nullable}, '{self.what}')"
            )
        else:
            w = self._len.min_size
            fmt = g.const(self._len._struct.unpack_from, "unpack")
            g.line(f"{n}, = {fmt}(buf, pos); pos += {w}")
            g.line(f"if {n} < -1: raise _Corrupt('negative {self.what} length %d' % {n})")
            if not self.nullable:
                g.line(f"if {n} < 0: raise _Corrupt('non-nullable {self.what} is null')")
        unit = f" * {self.unit}" if self.unit != 1 else ""
        g.line(f"if {n}{unit} > end - pos: raise _short({n}{unit}, end - pos)")

    def emit_write_len(self, g: Gen, n: str) -> None:
        if self.compact:
            g.line(f"if {n} < 127: out.append({n} + 1)")
            g.line(f"else: out += _uvarint_bytes({n} + 1)")
        else:
            g.line(f"out += {g.const(self._len._struct.pack, 'pack')}({n})")

    @contextmanager
    def emit_unless_null(self, g: Gen, expr: str) -> Iterator[None]:
        """What is emitted inside runs when ``expr`` is not None; a null writes the null length."""
        if not self.nullable:
            yield
            return
        null = b"\xff" * self._len.min_size  # -1 as int16 / int32
        g.line(f"if {expr} is None:")
        g.line("    out.append(0)" if self.compact else f"    out += {null!r}")
        g.line("else:")
        g.depth += 1
        yield
        g.depth -= 1

    def emit_parse_slice(self, g: Gen, target: str, convert: str) -> None:
        """Emit the parse of a string or bytes: ``convert`` formatted with the slice of the
        value (None when null)."""
        n = g.tmp("n")
        self.emit_len(g, n)
        value = convert.format(f"buf[pos:pos + {n}]")
        if self.nullable:
            g.line(f"if {n} < 0: {target} = None")
            g.line(f"else: {target} = {value}; pos += {n}")
        else:
            g.line(f"{target} = {value}; pos += {n}")


class KString(_Prefixed):
    what = "string"

    def __init__(self, compact: bool = False, nullable: bool = False) -> None:
        super().__init__(compact, nullable, wide=False)
        self.default = None if nullable else ""

    def _parse(self, stream: Any, context: Any, path: str) -> str | None:
        n = self._read_len(stream, path)
        return None if n is None else decode_utf8(stream_read(stream, n, path))

    def _build(self, obj: str | None, stream: Any, context: Any, path: str) -> str | None:
        raw = None if obj is None else obj.encode()
        if raw is not None and not self.compact and len(raw) > 0x7FFF:
            raise ValueError("string longer than 32767 bytes")
        self._write_len(None if raw is None else len(raw), stream, path)
        if raw:
            stream_write(stream, raw, len(raw), path)
        return obj

    def emit_parse(self, g: Gen, target: str) -> None:
        self.emit_parse_slice(g, target, "str({}, 'utf-8')")  # UnicodeDecodeError: see decode_from

    def emit_build(self, g: Gen, expr: str) -> None:
        raw, n = g.tmp("raw"), g.tmp("n")
        with self.emit_unless_null(g, expr):
            g.line(f"{raw} = {expr}.encode(); {n} = len({raw})")
            if not self.compact:
                g.line(f"if {n} > 0x7FFF: raise ValueError('string longer than 32767 bytes')")
            self.emit_write_len(g, n)
            g.line(f"out += {raw}")

    def __repr__(self) -> str:
        return f"{'compact ' if self.compact else ''}{'nullable ' if self.nullable else ''}string"


class KBytes(_Prefixed):
    what = "bytes"

    def __init__(self, compact: bool = False, nullable: bool = False) -> None:
        super().__init__(compact, nullable, wide=True)
        self.default = None if nullable else b""

    def _parse(self, stream: Any, context: Any, path: str) -> bytes | None:
        n = self._read_len(stream, path)
        return None if n is None else bytes(stream_read(stream, n, path))

    def _build(self, obj: bytes | None, stream: Any, context: Any, path: str) -> bytes | None:
        self._write_len(None if obj is None else len(obj), stream, path)
        if obj:
            stream_write(stream, bytes(obj), len(obj), path)
        return obj

    def emit_parse(self, g: Gen, target: str) -> None:
        self.emit_parse_slice(g, target, "bytes({})")

    def emit_build(self, g: Gen, expr: str) -> None:
        n = g.tmp("n")
        with self.emit_unless_null(g, expr):
            g.line(f"{n} = len({expr})")
            self.emit_write_len(g, n)
            g.line(f"out += {expr}")

    def __repr__(self) -> str:
        return f"{'compact ' if self.compact else ''}{'nullable ' if self.nullable else ''}bytes"


class KArray(_Prefixed):
    """An array of ``element``; decodes to a tuple (None when null)."""

    what = "array"

    def __init__(self, element: KafkaType, compact: bool = False, nullable: bool = False) -> None:
        super().__init__(compact, nullable, wide=True)
        self.element = element
        # Kafka rejects a count larger than the bytes left; elements never take less than one.
        self.unit = max(1, element.min_size)
        self.default = None if nullable else ()

    def _parse(self, stream: Any, context: Any, path: str) -> tuple[Any, ...] | None:
        n = self._read_len(stream, path)
        if n is None:
            return None
        return tuple(self.element._parsereport(stream, context, path) for _ in range(n))

    def _build(self, obj: Sequence[Any] | None, stream: Any, context: Any, path: str) -> Any:
        self._write_len(None if obj is None else len(obj), stream, path)
        for item in obj or ():
            self.element._build(item, stream, context, path)
        return obj

    def emit_parse(self, g: Gen, target: str) -> None:
        n = g.tmp("n")
        if self.element is Int32 and self.compact and not self.nullable:
            # The hot shape (replica lists): a one-byte count indexes a prebuilt unpack_from,
            # whose own bounds check covers the at most 126 * 4 bytes it reads.
            g.line(f"{n} = buf[pos] - 1; pos += 1")
            g.line(f"if 0 <= {n} < 0x7F: {target} = _I32U[{n}](buf, pos)")
            g.line("else:")
            g.line(f"    {n}, pos = _clen(buf, pos - 1, end, False, 'array')")
            g.line(f"    {target} = _i32_array(buf, pos, end, {n})")
            g.line(f"pos += {n} * 4")
            return
        self.emit_len(g, n)
        if self.nullable:
            g.line(f"if {n} < 0: {target} = None")
            g.line("else:")
            g.depth += 1
        if self.element is Int32:
            g.line(
                f"{target} = (_I32U[{n}] if {n} < 0x7F else _int32s({n}).unpack_from)(buf, pos); "
                f"pos += {n} * 4"
            )
        else:
            self.element.emit_parse_items(g, target, n)
        if self.nullable:
            g.depth -= 1

    def emit_build(self, g: Gen, expr: str) -> None:
        n = g.tmp("n")
        with self.emit_unless_null(g, expr):
            g.line(f"{n} = len({expr})")
            self.emit_write_len(g, n)
            if self.element is Int32:
                g.line(f"out += (_I32P[{n}] if {n} < 0x7F else _int32s({n}).pack)(*{expr})")
            else:
                self.element.emit_build_items(g, expr)

    def __repr__(self) -> str:
        flags = f"{'compact ' if self.compact else ''}{'nullable ' if self.nullable else ''}"
        return f"{flags}[]{self.element!r}"
