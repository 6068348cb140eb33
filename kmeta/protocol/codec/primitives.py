"""Kafka's wire primitives, defined once, as construct ``Construct`` subclasses.

int8..int64, uint16/32, float64, bool, (unsigned) varints and varlongs and uuid, on the
:class:`KafkaType` base they all share. The length-prefixed string, bytes and array types are
in :mod:`kmeta.protocol.codec.length_prefixed`; structs and tag sections in
:mod:`kmeta.protocol.codec.types`, which also re-exports everything from both.

Each primitive has two faces that must agree byte for byte (tests check it):

* the interpreted construct path (``_parse`` / ``_build``), which is the definition of the
  format and what a plain ``construct.Struct`` of these types would do;
* an emitter (``emit_parse`` / ``emit_build``) that writes straight-line Python for
  :mod:`kmeta.protocol.codec.compiler`. Stock compiled construct drops bounds checks; these emitters
  keep every one of them, because the compiled code parses untrusted bytes.

Every length or count read from the wire (:mod:`kmeta.protocol.codec.length_prefixed`) is checked
against the bytes left before anything is allocated: a count of N elements needs at least N *
``min_size`` bytes to follow, so a 10-byte frame can never build a million-element list.
Generated parsers read ``buf`` up to ``end == len(buf)``: fixed-width reads lean on
``unpack_from``'s and indexing's own bounds checks (their ``struct.error`` / ``IndexError``
become CorruptMessageError in ``Codec.decode_from``), while every count and length that would
size an allocation or a slice is checked explicitly. Decoded arrays are tuples: decoded messages
are immutable values that caches may keep as they are.
"""

from __future__ import annotations

import abc
import io
import struct
import uuid
from typing import Any

from construct import Construct, stream_read, stream_write

from kmeta.protocol.codec.codegen import (
    Gen,
    read_uvarint,
    varint_bytes,
    zigzag_decode,
)

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
