"""Message.splice: a body built from pieces encoded apart is the whole-message encoding."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kmeta.protocol.codec.schema import Message
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.messages import update_metadata as um
from tests.protocol.strategies import message_strategy

CASES = [(md.RESPONSE, "topics", v) for v in range(md.RESPONSE.min_version, md.RESPONSE.max_version + 1)] + [
    (um.REQUEST, "topic_states", v) for v in range(5, um.REQUEST.max_version + 1)
]


@pytest.mark.parametrize(("message", "field", "version"), CASES, ids=lambda c: str(getattr(c, "name", c)))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_spliced_pieces_are_the_whole_encoding(message: Message, field: str, version: int, data: Any) -> None:
    value = data.draw(message_strategy(message, version))
    fields = value._asdict()
    del fields["version"]
    elements = fields.pop(field)
    splice = message.splice(version, field)
    body = splice.head(**fields) + splice.count(len(elements))
    body += b"".join(splice.element(e) for e in elements) + splice.tail(**fields)
    assert body == message.encode(value)


def test_fields_not_given_are_their_defaults() -> None:
    splice = md.RESPONSE.splice(12, "topics")
    want = md.RESPONSE.encode(md.MetadataResponse(version=12, cluster_id="c"))
    assert splice.head(cluster_id="c") + splice.count(0) + splice.tail() == want


def test_bad_field_names_are_refused() -> None:
    with pytest.raises(ValueError, match="no such fields"):
        md.RESPONSE.splice(12, "topics").head(clusterid="c")
    with pytest.raises(ValueError, match="not an array of structs"):
        md.RESPONSE.splice(12, "cluster_id")
    with pytest.raises(ValueError, match="has no field"):
        md.RESPONSE.splice(12, "partitions")
