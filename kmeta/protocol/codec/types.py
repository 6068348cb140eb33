"""Kafka's wire types: structs with their tag sections, plus the primitives they are made of.

This is the one place to import the type system from. The primitives live in
:mod:`kmeta.protocol.codec.primitives` (ints, varints, uuid) and :mod:`kmeta.protocol.codec.length_prefixed`
(strings, bytes, arrays) and are re-exported here; the runtime that generated code calls is
:mod:`kmeta.protocol.codec.codegen`; the fast path for arrays of flat structs (partition states) is
:mod:`kmeta.protocol.codec.runs`.

A :class:`KStruct` is one struct at one version. Like the primitives it has an interpreted
construct face, the definition of the format, and an emitter for the compiler; decoded structs
are namedtuples, so a decoded message is an immutable value that caches may keep as it is.
Known tagged fields are read into their slot (unknown tags are skipped) and written only when
they differ from their default, in ascending tag order.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from construct import stream_read, stream_write

from kmeta.protocol.codec.codegen import Gen, read_uvarint, short_read, uvarint_bytes
from kmeta.protocol.codec.length_prefixed import KArray, KBytes, KString
from kmeta.protocol.codec.primitives import (
    ZERO_UUID,
    Bool,
    Fixed,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    KafkaType,
    UInt16,
    UInt32,
    Uuid,
    UVarint,
    UVarlong,
    Varint,
    Varlong,
    read_uvarint_stream,
    remaining,
)
from kmeta.protocol.codec.runs import FlatPacks, FlatRuns, Slot

__all__ = [
    "ZERO_UUID",
    "Bool",
    "Fixed",
    "Float64",
    "Int8",
    "Int16",
    "Int32",
    "Int64",
    "KArray",
    "KBytes",
    "KString",
    "KStruct",
    "KafkaType",
    "NullableStruct",
    "TaggedField",
    "UInt16",
    "UInt32",
    "UVarint",
    "UVarlong",
    "Uuid",
    "Varint",
    "Varlong",
    "read_uvarint",
    "uvarint_bytes",
]


class TaggedField:
    """One known tagged field of a struct: its tag, wire type and default."""

    __slots__ = ("default", "index", "name", "tag", "type")

    def __init__(self, index: int, name: str, tag: int, type_: KafkaType, default: Any) -> None:
        self.index, self.name, self.tag, self.type, self.default = index, name, tag, type_, default


class KStruct(KafkaType):
    """A struct at one version: the fields on the wire, in order, then (flexible) the tag section.

    ``fields`` lists every field of the record class in order, each with its wire type, or
    None when it is absent at this version or tagged (then it reads as its default unless a
    tag carries it). Decoding yields an instance of ``cls`` (a namedtuple).
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
            count = read_uvarint_stream(stream, path)
            if count > remaining(stream):
                raise short_read(count, remaining(stream))
            for _ in range(count):
                tag = read_uvarint_stream(stream, path)
                size = read_uvarint_stream(stream, path)
                if size > remaining(stream):
                    raise short_read(size, remaining(stream))
                raw = stream_read(stream, size, path)
                known = by_tag.get(tag)
                if known is not None:
                    values[known.index] = known.type.parse(raw)
        return self.cls(*self.prefix, *values)

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        values = tuple(obj)[len(self.prefix) :]
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
    def flat_slots(self) -> list[Slot] | None:
        """The slots of a flat struct, made of fixed-width fields and int32 arrays only
        (partition states), whose arrays :mod:`kmeta.protocol.codec.runs` decodes and encodes a
        whole element at a time; None for any other struct."""
        slots: list[Slot] = [("const", p) for p in self.prefix]
        for _, t, default in self.fields:
            if t is None:  # absent, or tagged: the runs only take empty tag sections
                slots.append(("const", default))
            elif isinstance(t, Fixed):
                slots.append(("fixed", t.fmt))
            elif isinstance(t, KArray) and t.element is Int32:
                slots.append(("array", t.compact))
            else:
                return None
        return slots

    def emit_parse_items(self, g: Gen, target: str, n: str) -> None:
        slots = self.flat_slots()
        if slots is None:
            super().emit_parse_items(g, target, n)
            return
        runs = FlatRuns(self.cls, slots, self.flexible)
        # Runs of same-layout elements first; the generic code takes the element a run stops
        # at (and rejects it when it is malformed), then the runs resume.
        run, items, item = g.const(runs.run, "run"), g.tmp("items"), g.tmp("item")
        g.line(f"{items} = []")
        g.line(f"pos = {run}(buf, pos, {n}, {items})")
        g.line(f"while len({items}) < {n}:")
        g.depth += 1
        self.emit_parse(g, item)
        g.line(f"{items}.append({item})")
        g.line(f"if len({items}) < {n}: pos = {run}(buf, pos, {n} - len({items}), {items})")
        g.depth -= 1
        g.line(f"{target} = tuple({items})")

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
        values = names + slot_vars  # (none: a stream's tail with nothing after its array)
        g.line(
            f"{target} = _tuple_new({cls}, ({', '.join(values)},))"
            if values
            else f"{target} = {cls}()"
        )

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
        g.line("pos += size")
        g.depth -= 2
        if self.tagged:  # no tag section read: the known tags keep their defaults
            g.line("else:")
            for t in self.tagged:
                g.line(f"    {slot_vars[t.index]} = {g.const(t.default, 'D')}")

    def emit_build_items(self, g: Gen, expr: str) -> None:
        slots = self.flat_slots()
        arrays = [t for _, t, _ in self.fields if isinstance(t, KArray)]
        if slots is None or self.tagged or self.prefix or any(t.nullable for t in arrays):
            super().emit_build_items(g, expr)
            return
        # One pack per element, chosen by its arrays' lengths (see runs.FlatPacks).
        packer = FlatPacks(slots, self.flexible)
        packs, make = g.const(packer.packs, "packs"), g.const(packer.make, "make")
        item, key, pack = g.tmp("item"), g.tmp("key"), g.tmp("pack")
        values = [g.tmp("f") for _ in self.fields]
        counts = {
            var: g.tmp("n")
            for (_, t, _), var in zip(self.fields, values, strict=True)
            if isinstance(t, KArray)
        }
        args: list[str] = []
        for (_, t, _), var in zip(self.fields, values, strict=True):
            if isinstance(t, Fixed):
                args.append(var)
            elif t is not None:
                args += [f"{counts[var]} + 1" if t.compact else counts[var], f"*{var}"]
        g.line(f"for {item} in {expr}:")
        g.depth += 1
        g.line(f"{', '.join(values)}, = {item}")
        if counts:
            g.line("; ".join(f"{n} = len({var})" for var, n in counts.items()))
        g.line(f"{key} = ({''.join(f'{n}, ' for n in counts.values())})")
        g.line(f"{pack} = {packs}.get({key}) or {make}({key})")
        g.line(f"if {pack} is not None: out += {pack}({', '.join(args)})")
        g.line("else:")
        g.depth += 1
        self.emit_build(g, item)
        g.depth -= 2

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
                g.line(f"out += _build_tags(({pairs},))")

    def __repr__(self) -> str:
        return f"KStruct({getattr(self.cls, '__name__', self.cls)})"


class NullableStruct(KafkaType):
    """A struct field that may be null (DescribeTopicPartitions' cursors): an int8 marker, -1
    for null (nothing follows) or 1 for present (the struct follows), as Kafka's generated
    code writes it; any negative marker reads as null, as Kafka reads it."""

    def __init__(self, struct_: KStruct) -> None:
        super().__init__()
        self.struct = struct_
        self.default = None
        self.min_size = 1

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        marker = Int8._parsereport(stream, context, path)
        return None if marker < 0 else self.struct._parsereport(stream, context, path)

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        if obj is None:
            Int8._build(-1, stream, context, path)
        else:
            Int8._build(1, stream, context, path)
            self.struct._build(obj, stream, context, path)
        return obj

    def emit_parse(self, g: Gen, target: str) -> None:
        marker = g.tmp("marker")
        g.line(f"{marker} = buf[pos]; pos += 1")  # IndexError past the end (Codec.decode_from)
        g.line(f"if {marker} >= 0x80:")
        g.line(f"    {target} = None")
        g.line("else:")
        g.depth += 1
        self.struct.emit_parse(g, target)
        g.depth -= 1

    def emit_build(self, g: Gen, expr: str) -> None:
        g.line(f"if {expr} is None:")
        g.line("    out.append(0xFF)")
        g.line("else:")
        g.depth += 1
        g.line("out.append(1)")
        self.struct.emit_build(g, expr)
        g.depth -= 1

    def __repr__(self) -> str:
        return f"nullable {self.struct!r}"
