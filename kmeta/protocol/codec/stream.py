"""A message body decoded in steps: ``head``, then the elements of one array, then ``tail``.

The decode-side counterpart of :mod:`kmeta.protocol.codec.splice`. A broker that receives an
UpdateMetadata of a million partitions (a ~45 MB body) cannot decode it in one call without
holding its event loop for about a second, and without every decoded record alive at once.
:meth:`kmeta.protocol.codec.schema.Message.stream` gives, for one top-level array field at one
version, a :class:`Stream` that reads the fields before the array (:meth:`Stream.head`), the
array's elements one at a time (:meth:`Stream.elements`; the caller decides how many per step
and applies them as it goes), and then the fields after it together with the message's tag
section (:meth:`Stream.tail`; a tagged field that precedes the array in the spec is read
there too, since it is on the wire only at the end). The element decoder is the very compiled
one the whole-message decoder inlines, and every bound of that decoder holds: tests hold the
values read in steps equal to ``decode`` of the same bytes.
"""

from __future__ import annotations

import struct
from collections import namedtuple
from collections.abc import Iterator
from typing import Any, NamedTuple

from kmeta.protocol.codec import columnar
from kmeta.protocol.codec.codegen import compact_len, short_read
from kmeta.protocol.codec.compiler import Codec, compile_struct
from kmeta.protocol.codec.types import KArray, KStruct, TaggedField
from kmeta.protocol.errors import CorruptMessageError

_INT32 = struct.Struct(">i")


class Stream:
    """How one version of a message is read around its top-level array ``field``."""

    __slots__ = ("_element", "_head", "_tail", "array", "field", "head_fields", "tail_fields")

    def __init__(self, ks: KStruct, field: str, label: str) -> None:
        before: list[tuple[str, Any, Any]] = []
        after: list[tuple[str, Any, Any]] = []
        array: KArray | None = None
        for name, wire, default in ks.fields:
            if name == field:
                if not isinstance(wire, KArray) or not isinstance(wire.element, KStruct):
                    raise ValueError(f"{label}: {field} is not an array of structs on the wire")
                array = wire
            elif array is None and wire is not None:
                before.append((name, wire, default))
            elif array is not None:
                after.append((name, wire, default))
        if array is None:
            raise ValueError(f"{label} has no field {field}")
        assert isinstance(array.element, KStruct)
        self.array = array
        self.field = field
        # every tagged field is read with the tail, wherever the spec lists it
        names = [name for name, _, _ in ks.fields]
        tagged_names = {t.name for t in ks.tagged}
        after += [(name, None, d) for name, _, d in ks.fields[: names.index(field)] if name in tagged_names]
        after_names = [name for name, _, _ in after]
        tagged = [
            TaggedField(after_names.index(t.name), t.name, t.tag, t.type, t.default) for t in ks.tagged
        ]
        self.head_fields: tuple[str, ...] = tuple(name for name, _, _ in before)
        self.tail_fields: tuple[str, ...] = tuple(after_names)
        head_cls = namedtuple("Head", self.head_fields)  # type: ignore[misc]
        tail_cls = namedtuple("Tail", self.tail_fields)  # type: ignore[misc]
        self._head: Codec = compile_struct(KStruct(head_cls, before), f"{label} head")
        self._tail: Codec = compile_struct(
            KStruct(tail_cls, after, tagged, ks.flexible), f"{label} tail"
        )
        self._element: Codec = compile_struct(array.element, f"{label} {field}[]")

    def head(self, buf: bytes, pos: int) -> tuple[Any, int, int]:
        """The fields before the array (a namedtuple), the array's element count (-1: null)
        and the position of its first element."""
        head, pos = self._head.decode_from(buf, pos)
        end = len(buf)
        if self.array.compact:
            if pos >= end:
                raise short_read(1, 0)
            n, pos = compact_len(buf, pos, end, self.array.nullable, "array")
        else:
            if end - pos < 4:
                raise short_read(4, end - pos)
            (n,) = _INT32.unpack_from(buf, pos)
            pos += 4
            if n < -1 or (n == -1 and not self.array.nullable):
                raise CorruptMessageError(f"bad array length {n}")
        if n * self.array.unit > end - pos:
            raise short_read(n * self.array.unit, end - pos)
        return head, n, pos

    def elements(self, buf: bytes, pos: int, count: int) -> Iterator[tuple[Any, int]]:
        """``count`` elements from ``pos``, each with the position after it."""
        decode = self._element.decode_from
        for _ in range(count):
            value, pos = decode(buf, pos)
            yield value, pos

    def tail(self, buf: bytes, pos: int) -> Any:
        """The fields after the array and every tagged field (a namedtuple)."""
        value, _ = self._tail.decode_from(buf, pos)
        return value


class Distinct(NamedTuple):
    """An array of keyed elements read by their distinct bodies: element ``e`` is
    ``states[keys[e]]`` with its first int32 field replaced by ``indexes[e]``."""

    indexes: list[int]
    keys: list[int]
    states: list[Any]


#: distinct element bodies remembered per array (hostile input cannot grow it past this)
MEMO_LIMIT = 1024


class KeyedStream:
    """One element of a top-level array (a topic state), read around its own array of
    elements whose first field is an int32 key (the partition states, keyed by index).

    In a topic state of a large UpdateMetadata the bytes of a partition state after its index
    repeat: same controller epoch, leader, leader epoch, ISR, zk version, replicas. So each
    distinct body is decoded once, by the very element decoder :class:`Stream` uses; every
    other element whose bytes equal a decoded one's (after the key) is that element with its
    own key, which is what the decoder would read from the same bytes. The decoder alone
    decides what is malformed."""

    __slots__ = ("_element", "_tail", "outer")

    def __init__(self, ks: KStruct, field: str, label: str) -> None:
        self.outer = Stream(ks, field, label)
        self._element = self.outer._element
        self._tail = self.outer._tail

    def read(self, buf: bytes, pos: int) -> tuple[Any, Distinct, Any, int]:
        """The fields before the array, the array, the fields after it and the tagged fields,
        and the position after the element."""
        head, count, pos = self.outer.head(buf, pos)
        parts = self._periodic(buf, pos, count) if count >= columnar.PERIODIC_FROM else None
        if parts is None:
            parts, pos = self._each(buf, pos, count)
        else:
            pos = parts[3]
        tail, pos = self._tail.decode_from(buf, pos)
        return head, Distinct(parts[0], parts[1], parts[2]), tail, pos

    def _each(self, buf: bytes, pos: int, count: int) -> tuple[tuple[list[int], list[int], list[Any], int], int]:
        """The elements read one at a time (a body not yet seen is decoded)."""
        indexes: list[int] = []
        keys: list[int] = []
        states: list[Any] = []
        memo: dict[bytes, int] = {}
        decode, key_at = self._element.decode_from, _INT32.unpack_from
        size, end = 0, len(buf)
        for _ in range(max(count, 0)):
            after = pos + size
            k = memo.get(buf[pos + 4 : after]) if size and after <= end else None
            if k is None:
                value, after = decode(buf, pos)
                body = buf[pos + 4 : after]
                k = memo.get(body)
                if k is None:
                    k = len(states)
                    states.append(value)
                    if len(memo) < MEMO_LIMIT:
                        memo[body] = k
                size = after - pos
            indexes.append(key_at(buf, pos)[0])
            keys.append(k)
            pos = after
        return (indexes, keys, states, pos), pos

    def _periodic(self, buf: bytes, pos: int, count: int) -> tuple[list[int], list[int], list[Any], int] | None:
        """The elements at C speed when their bodies repeat with a period of at most
        :data:`~kmeta.protocol.codec.columnar.MAX_PERIOD` elements (None: they do not).

        A topic's partition states differ by few fields that follow the partition index
        (the replica order rotates with it), so after the index they repeat every few
        elements. The array is cut into ``count`` pieces of the first element's size and
        tried for a period (:func:`kmeta.protocol.codec.columnar.period`). Each of the first P pieces
        is decoded where it is and must take exactly its piece; then every piece is one of
        them but for its index, and reading the elements one after another gives exactly that
        (the decoder reads the same bytes wherever they are). Otherwise the elements are read
        one at a time."""
        decode = self._element.decode_from
        _, after = decode(buf, pos)
        size = after - pos
        end = pos + count * size
        if end > len(buf) or size <= 4:
            return None
        repeat = columnar.period(buf[pos:end], size, 4)
        if repeat is None:
            return None
        states: list[Any] = []
        for k in range(min(repeat, count)):
            start = pos + k * size
            value, after = decode(buf, start)
            if after - start != size:
                return None
            states.append(value)
        indexes = columnar.read_int32_column(buf, pos, size, count)
        keys = (list(range(repeat)) * (count // repeat + 1))[:count]
        return indexes.tolist(), keys, states, end
