"""A message body built from pieces encoded apart: ``head | count | elements | tail``.

A server that answers many requests from one state (the broker's Metadata answers) encodes each
element of one top-level array once and splices every answer from those pieces. This is the
codec's public face for that: :meth:`kmeta.protocol.codec.schema.Message.splice` returns a
:class:`Splice` for one array field at one version, and callers never read the construct tree
themselves. The pieces are the very bytes the whole-message encoder writes (tests hold
``head + count + elements + tail`` equal to ``encode`` of the same record at every version).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kmeta.protocol.codec.codegen import uvarint_bytes
from kmeta.protocol.codec.compiler import compile_struct
from kmeta.protocol.codec.primitives import Int32
from kmeta.protocol.codec.types import KafkaType, KArray, KStruct, TaggedField

_Wire = tuple[tuple[str, KafkaType, Any], ...]


class Splice:
    """How one version of a message is laid out around its top-level array ``field``."""

    __slots__ = ("_after", "_before", "_build_element", "_names", "_tagged", "array", "flexible",
                 "leading")  # fmt: skip

    def __init__(self, struct: KStruct, field: str, label: str) -> None:
        before: list[tuple[str, KafkaType, Any]] = []
        after: list[tuple[str, KafkaType, Any]] = []
        array: KArray | None = None
        for name, wire, default in struct.fields:
            if name == field:
                if not isinstance(wire, KArray) or not isinstance(wire.element, KStruct):
                    raise ValueError(f"{label}: {field} is not an array of structs on the wire")
                array = wire
            elif wire is not None:
                (after if array is not None else before).append((name, wire, default))
        if array is None:
            raise ValueError(f"{label} has no field {field}")
        assert isinstance(array.element, KStruct)
        self.array = array
        self.flexible = struct.flexible
        self._before: _Wire = tuple(before)
        self._after: _Wire = tuple(after)
        self._tagged: tuple[TaggedField, ...] = tuple(struct.tagged)
        self._names = frozenset(name for name, _, _ in struct.fields)
        self._build_element: Callable[[Any, bytearray], None] = compile_struct(
            array.element, f"{label} {field}[]"
        ).build_into
        first = next(((name, t) for name, t, _ in array.element.fields if t is not None), None)
        #: the element's first field on the wire when it is an int32 (else None): see
        #: :meth:`element_rest`
        self.leading: str | None = first[0] if first is not None and first[1] is Int32 else None

    def inner(self, field: str) -> Splice:
        """The array's element struct laid out around its own array ``field`` (a topic's
        partitions inside a request's topics)."""
        assert isinstance(self.array.element, KStruct)
        return Splice(self.array.element, field, f"{self.array.element.cls.__name__}")

    def head(self, **values: object) -> bytes:
        """The fields before the array; a field not given is written as its default."""
        return self._fields(self._before, values)

    def count(self, n: int) -> bytes:
        """The array's length prefix for ``n`` elements."""
        if self.array.compact:
            return uvarint_bytes(n + 1)
        return n.to_bytes(4, "big", signed=True)

    def element(self, value: tuple[object, ...]) -> bytes:
        """One element (a record of the array's struct), encoded."""
        out = bytearray()
        self._build_element(value, out)
        return bytes(out)

    def element_rest(self, value: tuple[object, ...]) -> bytes:
        """``element(value)`` without its first four bytes, the int32 field :attr:`leading`.

        Elements that differ only in that field (a topic's partitions: the index, and few
        distinct states) encode as ``index.to_bytes(4, "big", signed=True) + rest``: each
        distinct rest is encoded once, with the element encoder itself."""
        if self.leading is None:
            raise ValueError("the element does not start with an int32 field")
        return self.element(value)[4:]

    def tail(self, **values: object) -> bytes:
        """The fields after the array, then (flexible versions) the message's tag section."""
        out = self._fields(self._after, values)
        if not self.flexible:
            return out
        tags = bytearray()
        present = 0
        for tf in self._tagged:
            value = values.get(tf.name, tf.default)
            if value != tf.default:
                data = tf.type.build(value)
                tags += uvarint_bytes(tf.tag) + uvarint_bytes(len(data)) + data
                present += 1
        return out + uvarint_bytes(present) + bytes(tags)

    def _fields(self, wire: _Wire, values: dict[str, object]) -> bytes:
        unknown = values.keys() - self._names
        if unknown:
            raise ValueError(f"no such fields: {sorted(unknown)}")
        return b"".join(t.build(values.get(name, default)) for name, t, default in wire)
