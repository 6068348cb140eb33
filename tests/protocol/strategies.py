"""Hypothesis strategies derived from the schema: valid messages of any API at any version.

The builder walks a Message's Field declarations the way the codec does: a field absent from
the version keeps its default, a value is None only where the version makes it nullable,
tagged fields get random values (often their default, so they are sometimes left out).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from hypothesis import strategies as st

from kmeta.protocol.codec.schema import Field, Message
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.registry import APIS

_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_UINT_BITS = {"uint16": 16, "uint32": 32}
_SMALL = 2  # elements per generated array: enough to cover counts, small enough to be quick


def _scalar(type_: str, nullable: bool) -> st.SearchStrategy[Any]:
    s: st.SearchStrategy[Any]
    if type_ in _INT_BITS:
        bits = _INT_BITS[type_]
        s = st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    elif type_ in _UINT_BITS:
        s = st.integers(0, (1 << _UINT_BITS[type_]) - 1)
    elif type_ == "float64":
        s = st.floats(allow_nan=False)
    elif type_ == "bool":
        s = st.booleans()
    elif type_ == "string":
        s = st.text(max_size=8)
    elif type_ in ("bytes", "records"):
        s = st.binary(max_size=8)
    elif type_ == "uuid":
        s = st.uuids() | st.just(ZERO_UUID)
    else:
        raise AssertionError(f"no strategy for {type_}")
    return st.none() | s if nullable else s


def _field(message: Message, f: Field, version: int) -> st.SearchStrategy[Any]:
    nullable = version in f.nullable
    if f.fields or f.element in message.structs:
        element: st.SearchStrategy[Any] = _struct(message, f.element, version)
        if nullable and not f.is_array:  # a nullable struct (DescribeTopicPartitions' cursor)
            element = st.none() | element
    else:
        element = _scalar(f.element, nullable and not f.is_array)
    if not f.is_array:
        return element
    array = st.lists(element, max_size=_SMALL).map(tuple)
    return st.none() | array if nullable else array


def _fields(
    message: Message, cls: Any, fields: tuple[Field, ...], version: int
) -> dict[str, st.SearchStrategy[Any]]:
    out: dict[str, st.SearchStrategy[Any]] = {}
    for f in fields:
        if version not in f.versions:
            out[f.name] = st.just(cls._field_defaults[f.name])
        else:
            out[f.name] = _field(message, f, version)
    return out


def _struct(message: Message, name: str, version: int) -> st.SearchStrategy[Any]:
    cls = message.classes[name]
    return st.builds(cls, **_fields(message, cls, message.structs[name], version))


@cache
def message_strategy(message: Message, version: int) -> st.SearchStrategy[Any]:
    """Valid values of ``message`` at ``version`` (the top-level record carries it)."""
    return st.builds(
        message.cls, version=st.just(version), **_fields(message, message.cls, message.fields, version)
    )


def every_message_version() -> list[tuple[str, Message, int]]:
    """(test id, message, version) for every API x direction x version in the registry."""
    out = []
    for api in APIS.values():
        for message in (api.request, api.response):
            for version in range(message.min_version, message.max_version + 1):
                out.append((f"{message.name}-v{version}", message, version))
    return out
