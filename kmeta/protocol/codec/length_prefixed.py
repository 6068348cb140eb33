"""Kafka's length-prefixed types: string, bytes and array, in classic and compact forms.

``compact`` means a uvarint N+1 prefix (0 is null) as used from the flexible versions on;
otherwise an int16 (strings) or int32 (bytes, arrays) prefix, -1 is null. They are apart from
the fixed-width primitives of :mod:`kmeta.protocol.codec.primitives` because they are where the
untrusted counts and lengths are: every one read from the wire is checked against the bytes
left before anything is allocated or sliced, on both the interpreted and the emitted path.
:mod:`kmeta.protocol.codec.types` re-exports them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from construct import stream_read, stream_write

from kmeta.protocol.codec.codegen import Gen, decode_utf8, short_read, uvarint_bytes
from kmeta.protocol.codec.primitives import Int16, Int32, KafkaType, read_uvarint_stream, remaining
from kmeta.protocol.errors import CorruptMessageError


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
        n = (
            read_uvarint_stream(stream, path) - 1
            if self.compact
            else self._len._parse(stream, None, path)
        )
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
