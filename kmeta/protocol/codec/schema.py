"""A small declarative schema that mirrors Kafka's JSON message specs.

``messages/<api>.py`` declare each API with :func:`F` fields, exactly as the JSON does
(snake_case names; the declaration itself is :mod:`kmeta.protocol.codec.field_spec`, re-exported
here so that a declaring module imports ``F``, ``S``, ``Message`` and ``Api`` from one place).
From one declaration this module derives, per version:

* the record classes: one namedtuple per struct, with every field of every version and the
  spec's defaults; the top-level class also carries ``version`` (one type per API, not per
  version). A module may declare them itself as typed ``NamedTuple`` classes (``records=``,
  as tools/gen_messages.py writes them) so the type checker sees every field; they are
  checked here against the fields, so the declared types cannot drift from the wire format;
* the interpreted construct (:meth:`Message.struct`), the definition of the wire format;
* the compiled codec (:meth:`Message.codec`), generated from that construct.

Fields absent from a version are not on the wire and decode as their default; tagged fields
are written only when they differ from their default.
"""

from __future__ import annotations

import uuid
from collections import namedtuple
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Generic, Protocol, TypeVar

from construct import ConstructError

from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.codec.columnar import gc_paused
from kmeta.protocol.codec.compiler import Codec, compile_struct
from kmeta.protocol.codec.field_spec import FIXED, MISSING, F, Field, S, Versions, type_default
from kmeta.protocol.codec.record_views import KRecordsView
from kmeta.protocol.codec.splice import Splice
from kmeta.protocol.codec.stream import Stream
from kmeta.protocol.codec.types import (
    ZERO_UUID,
    KafkaType,
    KArray,
    KBytes,
    KString,
    KStruct,
    NullableStruct,
    TaggedField,
    Uuid,
)
from kmeta.protocol.errors import CorruptMessageError, UnsupportedVersionError

__all__ = [
    "Api",
    "F",
    "Field",
    "Message",
    "Record",
    "Request",
    "S",
    "uuid_or_zero",
]

_UUID = Uuid()
#: frames larger than this are decoded with the cyclic GC paused (see ``Message.decode_from``);
#: from about a thousand partitions on, collections during the decode cost it a third or more
_GC_PAUSE_BYTES = 1 << 16


class Record(Protocol):
    """A message's record (a request or a response), as layers above hand it around: every
    message type (kmeta.protocol.messages) carries the version it is encoded at."""

    @property
    def version(self) -> int: ...


#: a message's record class (the request or the response of one API)
R = TypeVar("R", bound=Record)
R_co = TypeVar("R_co", bound=Record, covariant=True)


class Request(Record, Protocol[R_co]):
    """A request record that names its response's record class (franz-go's ``ResponseKind``):
    every generated request class has ``response_class()``, so a connection's ``request``
    returns the response's type, not ``Any``."""

    def response_class(self) -> type[R_co]: ...


class Message(Generic[R]):
    """One API's request or response: classes, construct and codecs per version. ``R`` is its
    record class (declare the module's message as ``REQUEST: Message[MetadataRequest]``)."""

    def __init__(
        self,
        name: str,
        api_key: int | None,
        valid: str,
        flexible: str,
        fields: Sequence[Field],
        common: Sequence[tuple[str, tuple[Field, ...]]] = (),
        records: Sequence[type[tuple[Any, ...]]] = (),
    ) -> None:
        self.name = name
        self.api_key = api_key
        self.valid = Versions.parse(valid)
        self.flexible = Versions.parse(flexible)
        self.min_version, self.max_version = self.valid.low, self.valid.high
        self.structs: dict[str, tuple[Field, ...]] = dict(common)
        self._collect(tuple(fields))
        declared = {cls.__name__: cls for cls in records}
        self.classes: dict[str, Any] = {}
        for struct_name, struct_fields in self.structs.items():
            self.classes[struct_name] = self._record(
                struct_name,
                tuple(f.name for f in struct_fields),
                tuple(type_default(f) for f in struct_fields),
                declared,
            )
        top = ("version", *(f.name for f in fields))
        defaults = (self.max_version, *(type_default(f) for f in fields))
        self.cls: type[R] = self._record(name, top, defaults, declared)
        self.fields = tuple(fields)
        self._struct = cache(self._make_struct)
        self._codec = cache(self._make_codec)
        self._view_codec = cache(self._make_view_codec)
        self._splice = cache(self._make_splice)
        self._stream = cache(self._make_stream)

    def _collect(self, fields: tuple[Field, ...]) -> None:
        for f in fields:
            if f.fields:
                self.structs[f.element] = f.fields
                self._collect(f.fields)

    @staticmethod
    def _record(
        name: str, fields: tuple[str, ...], defaults: tuple[Any, ...], declared: dict[str, Any]
    ) -> Any:
        """The declared record class of ``name`` when it matches the fields, else a new one."""
        cls = declared.get(name)
        if cls is None:
            made = namedtuple(name, fields, defaults=defaults)  # type: ignore[misc]
            made.__module__ = "kmeta.protocol.messages"
            return made
        given = getattr(cls, "_field_defaults", {})
        if cls._fields != fields or tuple(given.get(n, MISSING) for n in fields) != defaults:
            raise TypeError(f"record {name} does not match its fields {fields} = {defaults}")
        return cls

    # -- construct, per version ---------------------------------------------------------------
    def _check(self, version: int) -> None:
        if version not in self.valid:
            raise UnsupportedVersionError(
                f"{self.name} v{version} is outside {self.min_version}-{self.max_version}"
            )

    def struct(self, version: int) -> KStruct:
        """The interpreted construct for this version: the definition of the format."""
        self._check(version)
        return self._struct(version)

    def _make_struct(self, version: int) -> KStruct:
        return self._struct_of(self.cls, self.fields, version, prefix=(version,))

    def _struct_of(
        self, cls: Any, fields: tuple[Field, ...], version: int, prefix: tuple[Any, ...] = (),
        views: bool = False,
    ) -> KStruct:  # fmt: skip
        flexible = version in self.flexible
        wire: list[tuple[str, KafkaType | None, Any]] = []
        tagged: list[TaggedField] = []
        for i, f in enumerate(fields):
            default = type_default(f)
            if version not in f.versions:
                wire.append((f.name, None, default))
            elif f.tag is not None and version in f.tagged:
                wire.append((f.name, None, default))
                tagged.append(
                    TaggedField(i, f.name, f.tag, self._wire_type(f, version, views), default)
                )
            else:
                wire.append((f.name, self._wire_type(f, version, views), default))
        return KStruct(cls, wire, tagged, flexible, prefix)

    def _wire_type(self, f: Field, version: int, views: bool = False) -> KafkaType:
        compact = version in (f.flexible if f.flexible is not None else self.flexible)
        nullable = version in f.nullable
        element = self._element_type(
            f.element, version, compact, nullable and not f.is_array, views
        )
        if f.is_array:
            return KArray(element, compact=compact, nullable=nullable)
        return element

    def _element_type(
        self, type_: str, version: int, compact: bool, nullable: bool, views: bool = False
    ) -> KafkaType:
        if type_ in FIXED:
            return FIXED[type_]
        if type_ == "string":
            return KString(compact, nullable)
        if type_ == "records" and views:
            return KRecordsView(compact, nullable)
        if type_ in ("bytes", "records"):
            return KBytes(compact, nullable)
        if type_ == "uuid":
            return _UUID
        struct_ = self._struct_of(self.classes[type_], self.structs[type_], version, views=views)
        return NullableStruct(struct_) if nullable else struct_

    # -- compiled codecs ----------------------------------------------------------------------
    def codec(self, version: int) -> Codec:
        self._check(version)
        return self._codec(version)

    def _make_codec(self, version: int) -> Codec:
        return compile_struct(self._struct(version), f"{self.name} v{version}")

    def _make_view_codec(self, version: int) -> Codec:
        struct_ = self._struct_of(self.cls, self.fields, version, prefix=(version,), views=True)
        return compile_struct(struct_, f"{self.name} v{version}")

    def decode_viewing_records(self, data: bytes, version: int, pos: int = 0) -> R:
        """:meth:`decode`, with each ``records`` field a read-only view of ``data`` instead of
        a copy (:mod:`kmeta.protocol.codec.record_views`: its measurement and why it is safe)."""
        self._check(version)
        codec = self._view_codec(version)
        if len(data) - pos > _GC_PAUSE_BYTES:
            with gc_paused():
                return codec.decode_from(data, pos)[0]  # type: ignore[no-any-return]
        return codec.decode_from(data, pos)[0]  # type: ignore[no-any-return]

    def splice(self, version: int, field: str) -> Splice:
        """This version laid out around its top-level array ``field``, for bodies built from
        elements encoded apart (see :mod:`kmeta.protocol.codec.splice`)."""
        self._check(version)
        return self._splice(version, field)

    def _make_splice(self, version: int, field: str) -> Splice:
        return Splice(self._struct(version), field, f"{self.name} v{version}")

    def stream(self, version: int, field: str) -> Stream:
        """This version read in steps around its top-level array ``field`` (see
        :mod:`kmeta.protocol.codec.stream`)."""
        self._check(version)
        return self._stream(version, field)

    def _make_stream(self, version: int, field: str) -> Stream:
        return Stream(self._struct(version), field, f"{self.name} v{version}")

    def decode(self, data: bytes | bytearray | memoryview, version: int, pos: int = 0) -> R:
        """Decode one message body; bytes after the last field are ignored, as Kafka does."""
        value, _ = self.decode_from(data, version, pos)
        return value

    def decode_from(
        self, data: bytes | bytearray | memoryview, version: int, pos: int = 0
    ) -> tuple[R, int]:
        """Decode at ``pos``; return the value and the position after it.

        A large frame allocates hundreds of thousands of small tuples; letting the cyclic GC
        scan them (and the rest of the heap) mid-decode costs more than the decode itself, and
        they hold no cycles, so it is paused for frames over 64 KiB. The records stay tracked by
        the GC afterwards (CPython never untracks namedtuples): a caller that keeps a large
        message for long, like a broker installing an UpdateMetadata of 100k partitions (about
        130k tracked objects, a full collection walks them in ~50 ms), may ``gc.freeze()`` once
        it holds it; ``benchmarks/codec.py`` measures both.
        """
        codec = self.codec(version)
        if len(data) - pos > _GC_PAUSE_BYTES:
            with gc_paused():  # (kmeta.protocol.codec.columnar: its measured gain)
                return codec.decode_from(data, pos)
        return codec.decode_from(data, pos)

    def encode(self, value: R) -> bytes:
        out = bytearray()
        self.encode_into(value, out)
        return bytes(out)

    def encode_into(self, value: R, out: bytearray) -> None:
        self.codec(value.version).build_into(value, out)

    # -- the interpreted path, for tests and baselines ----------------------------------------
    def parse_interpreted(self, data: bytes, version: int) -> R:
        try:
            return self.struct(version).parse(data)  # type: ignore[no-any-return]
        except CorruptMessageError:
            raise
        except (ConstructError, ValueError, OverflowError) as exc:
            raise CorruptMessageError(f"{self.name} v{version}: {exc}") from None

    def build_interpreted(self, value: R) -> bytes:
        return self.struct(value.version).build(value)  # type: ignore[no-any-return]


#: an API's request and response record classes
Q = TypeVar("Q", bound=Record)
P = TypeVar("P", bound=Record)


@dataclass(frozen=True, slots=True)
class Api(Generic[Q, P]):
    """One API: its key and the messages of its request (``Q``) and response (``P``). Each
    generated module declares its ``API``; a handler registered for it is checked against
    ``Q`` and ``P`` (kmeta.net.dispatch)."""

    key: ApiKey
    request: Message[Q]
    response: Message[P]

    @property
    def min_version(self) -> int:
        return self.request.min_version

    @property
    def max_version(self) -> int:
        return self.request.max_version

    def is_flexible(self, version: int) -> bool:
        return version in self.request.flexible


def uuid_or_zero(value: uuid.UUID | None) -> uuid.UUID:
    return ZERO_UUID if value is None else value
