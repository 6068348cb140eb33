"""The typed records of kmeta/protocol/messages are the classes the codecs decode into, and
they cannot drift from the field declarations (Message checks them)."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence
from types import ModuleType
from typing import NamedTuple

import pytest

import kmeta.protocol.messages as messages
from kmeta.protocol.codec.schema import F, Message
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import describe_topic_partitions as dtp

MODULES = [
    importlib.import_module(f"kmeta.protocol.messages.{m.name}")
    for m in pkgutil.iter_modules(messages.__path__)
]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_record_is_declared_in_its_module(module: ModuleType) -> None:
    for message in (module.REQUEST, module.RESPONSE):
        assert getattr(module, message.name) is message.cls
        assert message.cls._fields[0] == "version"
        assert message.cls._field_defaults["version"] == message.max_version
        for name, cls in message.classes.items():
            assert getattr(module, name) is cls, name
            assert cls.__annotations__, f"{name} is not a typed record"


def test_decoded_messages_are_the_declared_records() -> None:
    request = ct.CreateTopicsRequest(
        version=5,
        topics=(ct.CreatableTopic(name="t", num_partitions=3, replication_factor=1),),
        timeout_ms=1000,
    )
    decoded = ct.REQUEST.decode(ct.REQUEST.encode(request), 5)
    assert type(decoded) is ct.CreateTopicsRequest
    assert type(decoded.topics[0]) is ct.CreatableTopic
    assert decoded == request
    assert ct.REQUEST.parse_interpreted(ct.REQUEST.encode(request), 5) == request


def test_a_struct_shared_by_request_and_response_is_one_record() -> None:
    assert dtp.REQUEST.classes["Cursor"] is dtp.RESPONSE.classes["Cursor"] is dtp.Cursor


class Thing(NamedTuple):
    version: int = 1
    name: str = ""
    ids: Sequence[int] = ()


class Renamed(NamedTuple):
    version: int = 1
    title: str = ""
    ids: Sequence[int] = ()


class OtherDefault(NamedTuple):
    version: int = 1
    name: str = "x"
    ids: Sequence[int] = ()


def thing(record: type[tuple[object, ...]]) -> Message:
    fields = (F("name", "string", "0+"), F("ids", "[]int32", "0+"))
    return Message(record.__name__, api_key=None, valid="0-1", flexible="none", fields=fields,
                   records=(record,))  # fmt: skip


def test_a_record_that_matches_its_fields_is_used() -> None:
    assert thing(Thing).cls is Thing
    assert thing(Thing).decode(thing(Thing).encode(Thing(name="a", ids=(1, 2))), 1) == Thing(1, "a", (1, 2))


@pytest.mark.parametrize("record", [Renamed, OtherDefault])
def test_a_record_that_drifted_from_its_fields_is_refused(record: type[tuple[object, ...]]) -> None:
    with pytest.raises(TypeError, match="does not match its fields"):
        thing(record)
