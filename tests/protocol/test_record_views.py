"""A Produce request read with its records as views of the frame (kmeta.protocol.codec.record_views):
the same values as the copying decoder, no copy of an immutable frame, a copy of a mutable one."""

from __future__ import annotations

import pytest

from kmeta.protocol.errors import CorruptMessageError
from kmeta.protocol.messages import fetch as fe
from kmeta.protocol.messages import produce as pr

BATCH_A = bytes(range(256)) * 300
BATCH_B = b"\x07" * 5000


def _request(version: int) -> pr.ProduceRequest:
    parts = (pr.PartitionProduceData(0, BATCH_A), pr.PartitionProduceData(1, None), pr.PartitionProduceData(2, BATCH_B))
    return pr.ProduceRequest(
        version=version, transactional_id="tx" if version >= 3 else None, acks=1, timeout_ms=30_000,
        topic_data=(pr.TopicProduceData("orders", parts), pr.TopicProduceData("audit", (pr.PartitionProduceData(3, b""),))),
    )  # fmt: skip


@pytest.mark.parametrize("version", [0, 2, 3, 8, 9, 11])
def test_records_are_read_only_views_of_the_frame_and_equal_what_the_copying_decoder_reads(version: int) -> None:
    frame = b"\x00" * 7 + pr.REQUEST.encode(_request(version))  # (a body that starts after a header)
    viewed = pr.REQUEST.decode_viewing_records(frame, version, 7)
    assert viewed == pr.REQUEST.decode(frame, version, 7)  # (a memoryview equals the bytes it shows)
    records = [p.records for t in viewed.topic_data for p in t.partition_data]
    assert records == [BATCH_A, None, BATCH_B, b""]
    for view in (r for r in records if r is not None):
        assert isinstance(view, memoryview)
        assert view.readonly
        assert view.obj is frame  # (no copy: the frame's own bytes)


def test_a_mutable_frame_is_copied_out() -> None:
    frame = bytearray(pr.REQUEST.encode(_request(9)))
    viewed = pr.REQUEST.decode_viewing_records(frame, 9)
    first = viewed.topic_data[0].partition_data[0].records
    assert type(first) is bytes
    frame[:] = b"\xff" * len(frame)  # (a caller reusing its buffer)
    assert first == BATCH_A


def test_a_read_only_view_of_bytes_is_viewed_without_a_copy() -> None:
    frame = pr.REQUEST.encode(_request(11))
    viewed = pr.REQUEST.decode_viewing_records(memoryview(frame), 11)  # type: ignore[arg-type]
    first = viewed.topic_data[0].partition_data[0].records
    assert isinstance(first, memoryview)
    assert first.obj is frame


@pytest.mark.parametrize("cut", [1, 100, 4000])
def test_a_truncated_frame_is_refused_as_the_copying_decoder_refuses_it(cut: int) -> None:
    frame = pr.REQUEST.encode(_request(9))[:-cut]
    with pytest.raises(CorruptMessageError) as copying:
        pr.REQUEST.decode(frame, 9)
    with pytest.raises(CorruptMessageError) as viewing:
        pr.REQUEST.decode_viewing_records(frame, 9)
    assert str(viewing.value) == str(copying.value)


def test_records_inside_nested_and_tagged_structs_are_viewed_too() -> None:
    part = fe.PartitionData(partition_index=0, high_watermark=5, records=BATCH_B)
    response = fe.FetchResponse(version=16, responses=(fe.FetchableTopicResponse(partitions=(part,)),))
    frame = fe.RESPONSE.encode(response)
    viewed = fe.RESPONSE.decode_viewing_records(frame, 16)
    assert viewed == fe.RESPONSE.decode(frame, 16)
    records = viewed.responses[0].partitions[0].records
    assert isinstance(records, memoryview)
    assert records.obj is frame
