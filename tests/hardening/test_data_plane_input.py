"""Bad input to the data plane's APIs (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch,
DeleteRecords) over 127.0.0.1, each answered with Kafka's error code: nothing crashes, nothing
is stored twice or half, and other connections keep being served."""

from __future__ import annotations

import asyncio
import struct
import zlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode as E
from kmeta.protocol.messages import delete_records as dr
from kmeta.protocol.messages import fetch as fe
from kmeta.protocol.messages import list_offsets as lo
from kmeta.protocol.messages import offset_for_leader_epoch as ofle
from kmeta.server.broker import Broker
from tests.server.helpers import PLAINTEXT, closed_by_peer, encode_frame
from tests.server.log_broker import EPOCH, TOPIC, batch, log_broker, produce, recrc

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

INT64_MAX, INT64_MIN = (1 << 63) - 1, -(1 << 63)
INT32_MAX, INT32_MIN = (1 << 31) - 1, -(1 << 31)


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    async with log_broker() as b:
        yield b


async def call(b: Broker, request: Any) -> Any:
    conn = await KafkaConnection.open("127.0.0.1", b.port(PLAINTEXT))
    try:
        return await conn.request(request, 10)
    finally:
        conn.close()


async def log_end(b: Broker, index: int = 0) -> int:
    req = lo.ListOffsetsRequest(version=9, replica_id=1, topics=(lo.ListOffsetsTopic(TOPIC, (lo.ListOffsetsPartition(index, -1, -1),)),))
    return int((await call(b, req)).topics[0].partitions[0].offset)


def fetch_request(index: int = 0, offset: int = 0, *, max_bytes: int = 1 << 20, part_max: int = 1 << 20,
                  replica_id: int = -1, epoch: int = -1, version: int = 12) -> fe.FetchRequest:  # fmt: skip
    return fe.FetchRequest(
        version=version, replica_id=replica_id, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes,
        topics=(fe.FetchTopic(topic=TOPIC, partitions=(fe.FetchPartition(
            partition=index, current_leader_epoch=epoch, fetch_offset=offset, partition_max_bytes=part_max),)),),
    )  # fmt: skip


def _with(data: bytes, offset: int, fmt: str, value: int, *, fix_crc: bool = False) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return recrc(bytes(out)) if fix_crc else bytes(out)


GOOD = batch([b"a", b"b", b"c"])
BAD_BATCHES = {
    "truncated": (GOOD[:-7], E.INVALID_RECORD),  # (a partial batch is no batch)
    "header-only": (GOOD[:11], E.INVALID_RECORD),
    "crc-broken": (GOOD[:-1] + bytes([GOOD[-1] ^ 0x55]), E.CORRUPT_MESSAGE),
    "two-batches": (GOOD + GOOD, E.INVALID_RECORD),
    "future-base-offset": (_with(GOOD, 0, ">q", 1000), E.INVALID_RECORD),
    "negative-base-offset": (_with(GOOD, 0, ">q", -5), E.INVALID_RECORD),
    "length-below-minimum": (_with(GOOD, 8, ">i", 3), E.CORRUPT_MESSAGE),
    "length-beyond-data": (_with(GOOD, 8, ">i", INT32_MAX), E.INVALID_RECORD),
    "unknown-magic": (_with(GOOD, 16, ">b", 7), E.CORRUPT_MESSAGE),
    "count-mismatch": (_with(GOOD, 57, ">i", 9, fix_crc=True), E.INVALID_RECORD),
    "negative-count": (_with(GOOD, 57, ">i", -1, fix_crc=True), E.INVALID_RECORD),
    "offset-delta-mismatch": (_with(GOOD, 23, ">i", 0, fix_crc=True), E.INVALID_RECORD),
    "control-batch": (_with(GOOD, 21, ">h", 0x20, fix_crc=True), E.INVALID_RECORD),
    "empty": (b"", E.INVALID_RECORD),
}


@pytest.mark.parametrize("name", sorted(BAD_BATCHES))
async def test_bad_batches_are_refused_and_nothing_is_stored(broker: Broker, name: str) -> None:
    data, error = BAD_BATCHES[name]
    conn = await KafkaConnection.open("127.0.0.1", broker.port(PLAINTEXT))
    try:
        assert (await produce(conn, 0, GOOD)).base_offset == 0
        for version in (3, 9, 11):
            refused = await produce(conn, 0, data, version=version)
            assert refused.error_code == error, version
        after = await produce(conn, 0, GOOD)
    finally:
        conn.close()
    assert (after.error_code, after.base_offset) == (E.NONE, 3)  # (the refused ones took no offset)
    assert await log_end(broker) == 6


async def test_a_mixed_request_stores_the_good_partition_only(broker: Broker) -> None:
    from kmeta.protocol.messages import produce as pr

    req = pr.ProduceRequest(version=9, acks=-1, timeout_ms=1000, topic_data=(pr.TopicProduceData(TOPIC, (
        pr.PartitionProduceData(0, GOOD), pr.PartitionProduceData(1, BAD_BATCHES["crc-broken"][0]),
        pr.PartitionProduceData(2, GOOD))),))  # fmt: skip
    resp = await call(broker, req)
    errors = {p.index: p.error_code for p in resp.responses[0].partition_responses}
    assert errors == {0: E.NONE, 1: E.CORRUPT_MESSAGE, 2: E.NOT_LEADER_OR_FOLLOWER}
    assert (await log_end(broker, 0), await log_end(broker, 1)) == (3, 0)


async def test_fetch_byte_limits_led_elsewhere_and_replica_ids(broker: Broker) -> None:
    conn = await KafkaConnection.open("127.0.0.1", broker.port(PLAINTEXT))
    for _ in range(3):
        await produce(conn, 0, GOOD)
    conn.close()

    def part(resp: Any) -> Any:
        return resp.responses[0].partitions[0]

    whole = part(await call(broker, fetch_request(max_bytes=INT32_MAX, part_max=INT32_MAX)))
    assert (whole.error_code, whole.high_watermark, len(whole.records)) == (E.NONE, 9, 3 * len(GOOD))
    # the first batch whole even when the limits are smaller (as Kafka), and nothing else
    tiny = part(await call(broker, fetch_request(max_bytes=1, part_max=1)))
    assert (tiny.error_code, len(tiny.records)) == (E.NONE, len(GOOD))
    zero = part(await call(broker, fetch_request(max_bytes=0, part_max=0)))
    assert zero.error_code == E.NONE
    # a negative size is refused by Kafka's segment read: answered as its unexpected error
    for limits in ((INT32_MIN, 1 << 20), (1 << 20, -1)):
        neg = part(await call(broker, fetch_request(max_bytes=limits[0], part_max=limits[1])))
        assert neg.error_code == E.UNKNOWN_SERVER_ERROR
    assert part(await call(broker, fetch_request(offset=10))).error_code == E.OFFSET_OUT_OF_RANGE
    assert part(await call(broker, fetch_request(offset=INT64_MIN))).error_code == E.OFFSET_OUT_OF_RANGE
    assert part(await call(broker, fetch_request(index=2))).error_code == E.NOT_LEADER_OR_FOLLOWER
    assert part(await call(broker, fetch_request(index=0, epoch=EPOCH - 1))).error_code == E.FENCED_LEADER_EPOCH
    # a replica id on a client listener: no authorizer, so it is a follower fetch, and broker 3
    # is no replica of the partition (Partition.followerReplicaOrThrow)
    assert part(await call(broker, fetch_request(replica_id=3))).error_code == E.NOT_LEADER_OR_FOLLOWER
    assert part(await call(broker, fetch_request(replica_id=3, epoch=EPOCH))).error_code == E.UNKNOWN_LEADER_EPOCH
    assert await log_end(broker) == 9  # (nothing moved)


async def test_list_offsets_out_of_range_targets_and_replica_ids(broker: Broker) -> None:
    conn = await KafkaConnection.open("127.0.0.1", broker.port(PLAINTEXT))
    await produce(conn, 0, GOOD)
    conn.close()

    async def ask(ts: int, replica_id: int = -1, index: int = 0) -> tuple[int, int]:
        req = lo.ListOffsetsRequest(version=9, replica_id=replica_id,
                                    topics=(lo.ListOffsetsTopic(TOPIC, (lo.ListOffsetsPartition(index, -1, ts),)),))  # fmt: skip
        p = (await call(broker, req)).topics[0].partitions[0]
        return p.error_code, p.offset

    assert await ask(INT64_MIN) == (E.UNSUPPORTED_VERSION, -1)
    assert await ask(-6) == (E.UNSUPPORTED_VERSION, -1)
    assert await ask(INT64_MAX) == (E.NONE, -1)
    assert await ask(-1, replica_id=7) == (E.NONE, 3)  # (a broker's id: the log end)
    assert await ask(-1, replica_id=INT32_MIN) == (E.NONE, 3)
    assert await ask(-1, index=INT32_MAX) == (E.UNKNOWN_TOPIC_OR_PARTITION, -1)
    assert await ask(-1, index=-1) == (E.UNKNOWN_TOPIC_OR_PARTITION, -1)


async def test_offset_for_leader_epoch_and_delete_records_extremes(broker: Broker) -> None:
    conn = await KafkaConnection.open("127.0.0.1", broker.port(PLAINTEXT))
    await produce(conn, 0, GOOD)
    conn.close()
    for epoch in (INT32_MAX, INT32_MIN, -1):
        req = ofle.OffsetForLeaderEpochRequest(version=4, replica_id=INT32_MAX, topics=(
            ofle.OffsetForLeaderTopic(TOPIC, (ofle.OffsetForLeaderPartition(0, -1, epoch),)),))  # fmt: skip
        assert (await call(broker, req)).topics[0].partitions[0].error_code == E.NONE
    for offset in (INT64_MAX, INT64_MIN, -2, 4):
        req = dr.DeleteRecordsRequest(version=2, timeout_ms=-1, topics=(
            dr.DeleteRecordsTopic(TOPIC, (dr.DeleteRecordsPartition(0, offset),)),))  # fmt: skip
        assert (await call(broker, req)).topics[0].partitions[0].error_code == E.OFFSET_OUT_OF_RANGE
    assert await log_end(broker) == 3


@pytest.mark.parametrize("cut", [1, 9, 17])
async def test_truncated_frames_of_the_new_apis_close_only_that_connection(broker: Broker, cut: int) -> None:
    conn = await KafkaConnection.open("127.0.0.1", broker.port(PLAINTEXT))
    requests = [
        fetch_request(),
        lo.ListOffsetsRequest(version=9, replica_id=-1, topics=(lo.ListOffsetsTopic(TOPIC, (lo.ListOffsetsPartition(0, -1, -1),)),)),
        ofle.OffsetForLeaderEpochRequest(version=4, topics=(ofle.OffsetForLeaderTopic(TOPIC, (ofle.OffsetForLeaderPartition(0, -1, 1),)),)),
        dr.DeleteRecordsRequest(version=2, timeout_ms=10, topics=(dr.DeleteRecordsTopic(TOPIC, (dr.DeleteRecordsPartition(0, 0),)),)),
    ]  # fmt: skip
    for req in requests:
        frame = encode_frame(req, 1)
        body = frame[4:-cut]  # (the frame says the shorter length: a whole frame, a short body)
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.port(PLAINTEXT))
        writer.write(struct.pack(">i", len(body)) + body)
        assert await closed_by_peer(reader)
        writer.close()
        # the other connection, open all along, is still served
        assert (await produce(conn, 0, GOOD)).error_code == E.NONE
    conn.close()
    assert await log_end(broker) == 3 * len(requests)


async def test_timestamps_out_of_the_topics_window_are_invalid_timestamp() -> None:
    import time

    from kmeta.protocol.records.legacy_records import Record, build_v2_batch

    window = {"message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": "60000"}
    async with log_broker(extra={"windowed": window}) as b:
        conn = await KafkaConnection.open("127.0.0.1", b.port(PLAINTEXT))
        now = int(time.time() * 1000)
        try:
            for ts in (now + 3_600_000, now - 3_600_000, INT64_MAX, 0):
                late = await produce(conn, 0, batch([b"x"], [ts]), topic="windowed")
                assert late.error_code == E.INVALID_TIMESTAMP, ts
            # a legacy (v1) set is up-converted first, then the log checks its timestamps too
            body = b"\x01\x00" + struct.pack(">q", now + 3_600_000) + struct.pack(">ii", -1, 1) + b"x"
            body = struct.pack(">I", zlib.crc32(body)) + body
            legacy = struct.pack(">qi", 0, len(body)) + body
            assert (await produce(conn, 0, legacy, version=2, topic="windowed")).error_code == E.INVALID_TIMESTAMP
            v2 = build_v2_batch([Record(now + 3_600_000, None, b"x")])
            assert (await produce(conn, 0, v2, version=0, topic="windowed")).error_code == E.INVALID_TIMESTAMP
            ok = await produce(conn, 0, batch([b"y"], [now]), topic="windowed")
            no_ts = await produce(conn, 0, batch([b"z"], [-1]), topic="windowed")  # (-1: not checked)
        finally:
            conn.close()
        assert [(ok.error_code, ok.base_offset), (no_ts.error_code, no_ts.base_offset)] == [(E.NONE, 0), (E.NONE, 1)]
