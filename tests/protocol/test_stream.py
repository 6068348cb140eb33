"""Message.stream: a body read in steps (head, elements, tail) is the whole-message decoding."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kmeta.protocol.codec.schema import Message
from kmeta.protocol.errors import CorruptMessageError
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.messages import update_metadata as um
from tests.protocol.strategies import message_strategy

CASES = [(um.REQUEST, "topic_states", v) for v in range(5, um.REQUEST.max_version + 1)] + [
    (md.RESPONSE, "topics", v) for v in (0, 9, 12)
]


def read_in_steps(message: Message, field: str, version: int, body: bytes) -> Any:
    stream = message.stream(version, field)
    head, count, pos = stream.head(body, 0)
    elements = []
    for element, after in stream.elements(body, pos, count):
        elements.append(element)
        pos = after
    tail = stream.tail(body, pos)
    return message.cls(version, **head._asdict(), **tail._asdict(), **{field: tuple(elements)})


@pytest.mark.parametrize(("message", "field", "version"), CASES, ids=lambda c: str(getattr(c, "name", c)))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_read_in_steps_is_the_whole_decoding(message: Message, field: str, version: int, data: Any) -> None:
    value = data.draw(message_strategy(message, version))
    body = message.encode(value)
    assert read_in_steps(message, field, version, body) == message.decode(body, version)


def test_a_tagged_field_listed_before_the_array_is_read_with_the_tail() -> None:
    request = um.UpdateMetadataRequest(version=8, controller_id=3, is_kraft_controller=True, type=2,
                                       controller_epoch=4, broker_epoch=5)  # fmt: skip
    stream = um.REQUEST.stream(8, "topic_states")
    assert "type" not in stream.head_fields
    assert "type" in stream.tail_fields
    assert read_in_steps(um.REQUEST, "topic_states", 8, um.REQUEST.encode(request)).type == 2


def test_truncated_or_lying_bodies_are_corrupt_in_every_step() -> None:
    parts = tuple(um.UpdateMetadataPartitionState(partition_index=i, isr=(1,), replicas=(1,)) for i in range(3))
    request = um.UpdateMetadataRequest(
        version=8, topic_states=(um.UpdateMetadataTopicState(topic_name="t", partition_states=parts),)
    )
    body = um.REQUEST.encode(request)
    stream = um.REQUEST.stream(8, "topic_states")
    _, count, pos = stream.head(body, 0)
    assert count == 1
    with pytest.raises(CorruptMessageError):
        stream.head(body[: pos - 1], 0)  # the count is missing
    with pytest.raises(CorruptMessageError):
        list(stream.elements(body[: pos + 10], pos, count))  # a topic state cut short
    with pytest.raises(CorruptMessageError):
        stream.tail(body[:-1], len(body) - 1)  # the tag section cut off
    # a count larger than the bytes left is refused before any element is read
    lying = bytearray(body)
    lying[pos - 1] = 0x7F
    with pytest.raises(CorruptMessageError):
        stream.head(bytes(lying), 0)


def test_versions_without_the_array_on_the_wire_have_no_stream() -> None:
    with pytest.raises(ValueError, match="not an array of structs on the wire"):
        um.REQUEST.stream(4, "topic_states")
