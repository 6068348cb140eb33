"""The fields of Kafka's JSON message specs, as ``messages/<api>.py`` declare them.

:func:`F` declares one field with the JSON's attributes (versions, nullable and tagged versions,
tag, default, flexible override), :func:`S` a common struct, :class:`Versions` one version
range as the JSON writes it; :func:`type_default` is the default a field decodes to when a
version does not carry it. This is the declaration only, apart from :mod:`kmeta.protocol.codec.schema`,
which derives record classes, constructs and codecs from it (and re-exports ``F``, ``S`` and
``Field``, the one import of the declaring modules). The names follow Kafka's generator
(``FieldSpec``, ``StructSpec``, ``Versions``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kmeta.protocol.codec.types import (
    ZERO_UUID,
    Bool,
    Fixed,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt16,
    UInt32,
)

#: the spec's fixed-width type names and their wire types
FIXED: dict[str, Fixed] = {
    "int8": Int8,
    "int16": Int16,
    "int32": Int32,
    "int64": Int64,
    "uint16": UInt16,
    "uint32": UInt32,
    "float64": Float64,
    "bool": Bool,
}
#: "no default given" (None is a default: a nullable field's)
MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class Versions:
    """A version range as the JSON writes it: "0+", "3-7", "5" or "none"."""

    low: int
    high: int  # inclusive; 2**15 for open-ended ranges

    @classmethod
    def parse(cls, text: str) -> Versions:
        if text == "none":
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), 1 << 15)
        low, _, high = text.partition("-")
        return cls(int(low), int(high or low))

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high


@dataclass(frozen=True)
class Field:
    name: str
    type: str  # "int32", "string", "uuid", "[]int32", "[]SomeStruct", "SomeStruct"
    versions: Versions
    nullable: Versions
    tag: int | None
    tagged: Versions
    default: Any
    fields: tuple[Field, ...]
    flexible: Versions | None  # a per-field override: ClientId is never compact

    @property
    def element(self) -> str:
        return self.type[2:] if self.type.startswith("[]") else self.type

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")


def F(
    name: str,
    type: str,
    versions: str,
    *fields: Field,
    nullable: str = "none",
    tag: int | None = None,
    tagged: str = "none",
    default: Any = MISSING,
    flexible: str | None = None,
) -> Field:
    """Declare one field, with the JSON spec's attributes."""
    return Field(
        name,
        type,
        Versions.parse(versions),
        Versions.parse(nullable),
        tag,
        Versions.parse(tagged),
        default,
        tuple(fields),
        None if flexible is None else Versions.parse(flexible),
    )


def S(name: str, *fields: Field) -> tuple[str, tuple[Field, ...]]:
    """Declare a common struct (the JSON's ``commonStructs``)."""
    return name, tuple(fields)


def type_default(f: Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.is_array:
        return ()
    if f.type in FIXED:
        return FIXED[f.type].default
    if f.type == "string":
        return ""
    if f.type in ("bytes", "records"):
        return b""
    if f.type == "uuid":
        return ZERO_UUID
    return None  # a nested struct with no default
