"""Kafka's wire primitives, defined once, as construct ``Construct`` subclasses.

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
``struct.error`` / ``IndexError`` become CorruptMessageError in ``Message.decode_from``), while
every count and length that would size an allocation or a slice is checked explicitly. Decoded arrays are tuples, decoded structs are
namedtuples: decoded messages are immutable values that caches may keep as they are.
"""

from __future__ import annotations

import io
import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from construct import Construct, stream_read, stream_write

from kmeta.protocol.errors import CorruptMessageError

ZERO_UUID = uuid.UUID(int=0)


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
# Runtime helpers that generated code calls (kept tiny; the hot cases are inlined).


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
}


def _remaining(stream: io.IOBase) -> int:
    here = stream.tell()
    end = stream.seek(0, io.SEEK_END)
    stream.seek(here)
    return end - here


def _read_uvarint_stream(stream: io.IOBase, path: str, max_bytes: int = 5) -> int:
    raw = bytearray()
    while True:
        b = stream_read(stream, 1, path)[0]
        raw.append(b)
        if not b & 0x80 or len(raw) >= max_bytes:
            break
    value, _ = read_uvarint(bytes(raw), 0, len(raw), max_bytes)
    return value


class KafkaType(Construct):  # type: ignore[misc]
    """Base of every Kafka primitive: a construct plus a fast-path emitter."""

    #: fewest bytes one value can take on the wire; bounds array counts
    min_size = 1
    #: ``struct`` format character for fixed-width types, which the compiler groups
    fmt: str | None = None
    default: Any = None

    def emit_parse(self, g: Gen, target: str) -> None:
        raise NotImplementedError(type(self).__name__)  # every concrete type overrides

    def emit_build(self, g: Gen, expr: str) -> None:
        raise NotImplementedError(type(self).__name__)  # every concrete type overrides


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
        value = _read_uvarint_stream(stream, path, self.max_bytes)
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
        g.line(f"out += {expr}.bytes")

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
        n = _read_uvarint_stream(stream, path) - 1 if self.compact else self._len._parse(stream, None, path)
        if n < 0:
            if n < -1 and not self.compact:
                raise CorruptMessageError(f"negative {self.what} length {n}")
            if not self.nullable:
                raise CorruptMessageError(f"non-nullable {self.what} is null")
            return None
        if n * self.unit > _remaining(stream):
            raise short_read(n * self.unit, _remaining(stream))
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
        n = g.tmp("n")
        self.emit_len(g, n)
        value = f"str(buf[pos:pos + {n}], 'utf-8')"  # UnicodeDecodeError: see decode_from
        if self.nullable:
            g.line(f"if {n} < 0: {target} = None")
            g.line(f"else: {target} = {value}; pos += {n}")
        else:
            g.line(f"{target} = {value}; pos += {n}")

    def emit_build(self, g: Gen, expr: str) -> None:
        raw, n = g.tmp("raw"), g.tmp("n")
        if self.nullable:
            g.line(f"if {expr} is None:")
            g.line("    out.append(0)" if self.compact else "    out += b'\\xff\\xff'")
            g.line("else:")
            g.depth += 1
        g.line(f"{raw} = {expr}.encode(); {n} = len({raw})")
        if not self.compact:
            g.line(f"if {n} > 0x7FFF: raise ValueError('string longer than 32767 bytes')")
        self.emit_write_len(g, n)
        g.line(f"out += {raw}")
        if self.nullable:
            g.depth -= 1

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
        n = g.tmp("n")
        self.emit_len(g, n)
        value = f"bytes(buf[pos:pos + {n}])"
        if self.nullable:
            g.line(f"if {n} < 0: {target} = None")
            g.line(f"else: {target} = {value}; pos += {n}")
        else:
            g.line(f"{target} = {value}; pos += {n}")

    def emit_build(self, g: Gen, expr: str) -> None:
        n = g.tmp("n")
        if self.nullable:
            g.line(f"if {expr} is None:")
            g.line("    out.append(0)" if self.compact else "    out += b'\\xff\\xff\\xff\\xff'")
            g.line("else:")
            g.depth += 1
        g.line(f"{n} = len({expr})")
        self.emit_write_len(g, n)
        g.line(f"out += {expr}")
        if self.nullable:
            g.depth -= 1

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
            items, item = g.tmp("items"), g.tmp("item")
            g.line(f"{items} = []")
            g.line(f"for _ in range({n}):")
            g.depth += 1
            self.element.emit_parse(g, item)
            g.line(f"{items}.append({item})")
            g.depth -= 1
            g.line(f"{target} = tuple({items})")
        if self.nullable:
            g.depth -= 1

    def emit_build(self, g: Gen, expr: str) -> None:
        n, item = g.tmp("n"), g.tmp("item")
        if self.nullable:
            g.line(f"if {expr} is None:")
            g.line("    out.append(0)" if self.compact else "    out += b'\\xff\\xff\\xff\\xff'")
            g.line("else:")
            g.depth += 1
        g.line(f"{n} = len({expr})")
        self.emit_write_len(g, n)
        if self.element is Int32:
            g.line(f"out += _int32s({n}).pack(*{expr})")
        else:
            g.line(f"for {item} in {expr}:")
            g.depth += 1
            self.element.emit_build(g, item)
            g.depth -= 1
        if self.nullable:
            g.depth -= 1

    def __repr__(self) -> str:
        flags = f"{'compact ' if self.compact else ''}{'nullable ' if self.nullable else ''}"
        return f"{flags}[]{self.element!r}"


class TaggedField:
    """One known tagged field of a struct: its tag, wire type and default."""

    __slots__ = ("default", "index", "name", "tag", "type")

    def __init__(self, index: int, name: str, tag: int, type_: KafkaType, default: Any) -> None:
        self.index, self.name, self.tag, self.type, self.default = index, name, tag, type_, default


class KStruct(KafkaType):
    """A struct at one version: the fields on the wire, in order, then (flexible) the tag section.

    ``slots`` lists every field of the record class in order; each slot is either an index
    into the wire fields, a tagged field, or absent at this version (filled with its default).
    Decoding yields an instance of ``cls`` (a namedtuple).
    """

    def __init__(
        self,
        cls: Callable[..., Any],
        fields: Sequence[tuple[str, KafkaType | None, Any]],
        tagged: Sequence[TaggedField] = (),
        flexible: bool = False,
        prefix: Sequence[Any] = (),
    ) -> None:
        super().__init__()
        self.cls = cls
        self.fields = list(fields)  # (name, type or None when absent at this version, default)
        self.tagged = sorted(tagged, key=lambda t: t.tag)
        self.flexible = flexible
        self.prefix = tuple(prefix)  # leading values (the top-level "version")
        wire = [t for _, t, _ in self.fields if t is not None]
        self.min_size = sum(t.min_size for t in wire) + (1 if flexible else 0)

    # interpreted ---------------------------------------------------------------------------
    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        values = [
            t._parsereport(stream, context, f"{path} -> {name}") if t is not None else default
            for name, t, default in self.fields
        ]
        if self.flexible:
            by_tag = {t.tag: t for t in self.tagged}
            count = _read_uvarint_stream(stream, path)
            if count > _remaining(stream):
                raise short_read(count, _remaining(stream))
            for _ in range(count):
                tag = _read_uvarint_stream(stream, path)
                size = _read_uvarint_stream(stream, path)
                if size > _remaining(stream):
                    raise short_read(size, _remaining(stream))
                raw = stream_read(stream, size, path)
                known = by_tag.get(tag)
                if known is not None:
                    values[known.index] = known.type.parse(raw)
        return self.cls(*self.prefix, *values)

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        values = tuple(obj)[len(self.prefix):]
        for (name, t, _), value in zip(self.fields, values, strict=True):
            if t is not None:
                t._build(value, stream, context, f"{path} -> {name}")
        if self.flexible:
            present = [tf for tf in self.tagged if values[tf.index] != tf.default]
            raw = uvarint_bytes(len(present))
            stream_write(stream, raw, len(raw), path)
            for tf in present:
                data = tf.type.build(values[tf.index])
                head = uvarint_bytes(tf.tag) + uvarint_bytes(len(data))
                stream_write(stream, head + data, len(head) + len(data), path)
        return obj

    # emitted -------------------------------------------------------------------------------
    def emit_parse(self, g: Gen, target: str) -> None:
        names: list[str] = [g.const(p, "P") for p in self.prefix]
        fixed: list[tuple[str, Fixed]] = []

        def flush() -> None:
            if not fixed:
                return
            s = struct.Struct(">" + "".join(t.fmt or "" for _, t in fixed))
            unpack = g.const(s.unpack_from, "unpack")  # raises struct.error past end
            lhs = ", ".join(v for v, _ in fixed) + ("," if len(fixed) == 1 else "")
            g.line(f"{lhs} = {unpack}(buf, pos); pos += {s.size}")
            fixed.clear()

        slot_vars: list[str] = []
        for _name, t, default in self.fields:
            if t is None:
                slot_vars.append(g.const(default, "D"))
                continue
            var = g.tmp("f")
            slot_vars.append(var)
            if isinstance(t, Fixed):
                fixed.append((var, t))
            else:
                flush()
                t.emit_parse(g, var)
        flush()
        if self.flexible:
            self._emit_parse_tags(g, slot_vars)
        cls = g.const(self.cls, "C")
        g.line(f"{target} = _tuple_new({cls}, ({', '.join(names + slot_vars)},))")

    def _emit_parse_tags(self, g: Gen, slot_vars: list[str]) -> None:
        if not self.tagged:  # nothing known to read: skip whatever is there
            g.line("if buf[pos]: pos = _skip_tags(buf, pos, end)")
            g.line("else: pos += 1")
            return
        count = g.tmp("ntags")
        g.line(f"{count} = buf[pos]; pos += 1")
        g.line(f"if {count}:")
        g.depth += 1
        g.line(f"if {count} & 0x80: {count}, pos = _uvarint(buf, pos - 1, end)")
        g.line(f"if {count} > end - pos: raise _short({count}, end - pos)")
        for t in self.tagged:  # a known tag may be absent: start from its default
            var = g.tmp("tag")
            g.line(f"{var} = {g.const(t.default, 'D')}")
            slot_vars[t.index] = var
        g.line(f"for _ in range({count}):")
        g.depth += 1
        g.line("tag, pos = _uvarint(buf, pos, end)")
        g.line("size, pos = _uvarint(buf, pos, end)")
        g.line("if size > end - pos: raise _short(size, end - pos)")
        for t in self.tagged:
            parse = g.const(t.type.parse, "tagparse")
            g.line(f"if tag == {t.tag}: {slot_vars[t.index]} = _tagged({parse}, buf, pos, size)")
        g.namespace["_tagged"] = parse_tagged
        g.line("pos += size")
        g.depth -= 2
        if self.tagged:  # no tag section read: the known tags keep their defaults
            g.line("else:")
            for t in self.tagged:
                g.line(f"    {slot_vars[t.index]} = {g.const(t.default, 'D')}")

    def emit_build(self, g: Gen, expr: str) -> None:
        skip = len(self.prefix)
        values = [g.tmp("f") for _ in range(skip + len(self.fields))]
        if len(values) == 1:
            g.line(f"{values[0]}, = {expr}")
        elif values:
            g.line(f"{', '.join(values)} = {expr}")
        values = values[skip:]
        fixed: list[tuple[str, Fixed]] = []

        def flush() -> None:
            if fixed:
                s = struct.Struct(">" + "".join(t.fmt or "" for _, t in fixed))
                pack = g.const(s.pack, "pack")
                g.line(f"out += {pack}({', '.join(v for v, _ in fixed)})")
                fixed.clear()

        for (_, t, _), var in zip(self.fields, values, strict=True):
            if t is None:
                continue
            if isinstance(t, Fixed):
                fixed.append((var, t))
            else:
                flush()
                t.emit_build(g, var)
        flush()
        if self.flexible:
            if not self.tagged:
                g.line("out.append(0)")
            else:
                pairs = ", ".join(
                    f"({t.tag}, {values[t.index]}, {g.const(t.default, 'D')}, {g.const(t.type.build, 'tagbuild')})"
                    for t in self.tagged
                )
                g.namespace["_build_tags"] = build_tags
                g.line(f"out += _build_tags(({pairs},))")

    def __repr__(self) -> str:
        return f"KStruct({getattr(self.cls, '__name__', self.cls)})"


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
