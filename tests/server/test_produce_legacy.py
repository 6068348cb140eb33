"""Produce v0-v2, as Kafka 3.x serves it: legacy message sets (magic 0/1) up-converted to one
v2 batch on append, over loopback. Sets built by kafka-python's legacy builder (independent of
kmeta); an old producer (kafka-python pinned to 0.9 / 0.10) over the wire; records read back
by a modern consumer."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest

with warnings.catch_warnings():  # kafka-python 3.0.12 reads its schemas with read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode as E
from kmeta.protocol.messages import fetch as fe
from kmeta.protocol.messages import produce as pr
from kmeta.server.broker import Broker
from tests.server.helpers import PLAINTEXT, encode_frame, read_frame
from tests.server.log_broker import TOPIC, batch, log_broker, observe, produce

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

NONE, GZIP, SNAPPY, LZ4 = 0, 1, 2, 3


def legacy(magic: int, codec: int, values: list[bytes], ts: int = 1_700_000_000_000) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 24)
    for i, value in enumerate(values):
        builder.append(i, ts + i if magic else None, b"key" if i % 2 else None, value)
    return bytes(builder.build())


async def read_all(b: Broker, index: int = 0) -> list[tuple[int, int, bytes | None, bytes | None, int]]:
    """Every record of the partition as a consumer fetches it: (offset, timestamp, key, value,
    the batch's compression codec), decoded by kafka-python's v2 reader."""
    conn = await KafkaConnection.open("127.0.0.1", b.port(PLAINTEXT))
    try:
        req = fe.FetchRequest(
            version=12, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 24,
            topics=(fe.FetchTopic(topic=TOPIC, partitions=(
                fe.FetchPartition(partition=index, fetch_offset=0, partition_max_bytes=1 << 24),)),),
        )  # fmt: skip
        resp = await conn.request(req, 10)
    finally:
        conn.close()
    data = bytes(resp.responses[0].partitions[0].records or b"")
    out = []
    pos = 0
    while pos + 12 <= len(data):
        size = int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
        rb = DefaultRecordBatch(data[pos : pos + size])
        assert rb.validate_crc()
        out += [(r.offset, r.timestamp, r.key, r.value, rb.compression_type) for r in rb]
        pos += size
    return out


@pytest.mark.parametrize(
    ("version", "magic", "codec"),
    [(0, 0, NONE), (1, 0, GZIP), (2, 1, NONE), (2, 1, GZIP), (2, 1, SNAPPY), (2, 1, LZ4), (1, 0, SNAPPY)],
)
async def test_legacy_sets_are_stored_as_one_v2_batch(version: int, magic: int, codec: int) -> None:
    async with log_broker() as b:
        conn = await KafkaConnection.open("127.0.0.1", b.port(PLAINTEXT))
        first = await produce(conn, 0, legacy(magic, codec, [b"a", b"b", b"c"]), version=version)
        second = await produce(conn, 0, legacy(magic, codec, [b"d"]), version=version)
        conn.close()
        assert (first.error_code, first.base_offset, second.error_code, second.base_offset) == (0, 0, 0, 3)
        assert first.log_append_time_ms == -1  # (CreateTime; v2 carries the field)
        records = await read_all(b)
        assert [(r[0], r[3]) for r in records] == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
        assert [r[2] for r in records] == [None, b"key", None, None]
        base = 1_700_000_000_000
        assert [r[1] for r in records] == ([base, base + 1, base + 2, base] if magic else [-1] * 4)
        assert {r[4] for r in records} == {codec}  # (compression.type=producer keeps the codec)


async def test_v2_batches_in_old_versions_are_taken_as_kafka_takes_them() -> None:
    async with log_broker() as b:
        conn = await KafkaConnection.open("127.0.0.1", b.port(PLAINTEXT))
        ok = await produce(conn, 0, batch([b"x", b"y"]), version=0)
        two = await produce(conn, 0, batch([b"x"]) + batch([b"y"]), version=1)
        conn.close()
        assert (ok.error_code, ok.base_offset) == (0, 0)
        assert two.error_code == E.INVALID_RECORD  # ("Compressed outer record has more than one batch")
        assert [r[3] for r in await read_all(b)] == [b"x", b"y"]


@pytest.mark.parametrize(
    ("name", "error"),
    [("crc", E.CORRUPT_MESSAGE), ("mixed", E.INVALID_RECORD), ("two-wrappers", E.INVALID_RECORD),
     ("empty", E.INVALID_RECORD), ("bad-gzip", E.UNKNOWN_SERVER_ERROR)],
)  # fmt: skip
async def test_bad_legacy_sets_get_kafkas_errors_and_store_nothing(name: str, error: int) -> None:
    good = legacy(1, NONE, [b"a", b"b"])
    data = {
        "crc": good[:-1] + bytes([good[-1] ^ 0xFF]),
        "mixed": legacy(0, NONE, [b"a"]) + legacy(1, NONE, [b"b"]),
        "two-wrappers": legacy(1, GZIP, [b"a"]) + legacy(1, GZIP, [b"b"]),
        "empty": b"",
        "bad-gzip": _wrapper_with_value(b"not gzip"),
    }[name]
    async with log_broker() as b:
        conn = await KafkaConnection.open("127.0.0.1", b.port(PLAINTEXT))
        bad = await produce(conn, 0, data, version=2)
        after = await produce(conn, 0, good, version=2)
        conn.close()
        assert bad.error_code == error
        assert (after.error_code, after.base_offset) == (0, 0)  # (nothing of the bad one stored)
        assert [r[3] for r in await read_all(b)] == [b"a", b"b"]


def _wrapper_with_value(value: bytes) -> bytes:
    import struct
    import zlib

    body = bytes([1, GZIP]) + struct.pack(">q", 5) + struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    body = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(body)) + body


async def test_acks_0_legacy_produce_stores_without_an_answer() -> None:
    async with log_broker() as b:
        req = pr.ProduceRequest(version=1, acks=0, timeout_ms=1000, topic_data=(
            pr.TopicProduceData(TOPIC, (pr.PartitionProduceData(0, legacy(0, NONE, [b"q"])),)),))  # fmt: skip
        reader, writer = await asyncio.open_connection("127.0.0.1", b.port(PLAINTEXT))
        writer.write(encode_frame(req, 1) + encode_frame(req._replace(acks=1), 2))
        answer = await read_frame(reader)  # (the acks=0 request has none: this is the second's)
        writer.close()
        assert answer[:4] == (2).to_bytes(4, "big")
        assert [r[3] for r in await read_all(b)] == [b"q", b"q"]


@pytest.mark.parametrize(
    ("api_version", "codec", "produce_version"),
    [((0, 9), None, 1), ((0, 10, 0), None, 2), ((0, 10, 0), "gzip", 2), ((0, 8, 2), None, 0)],
)
async def test_an_old_kafka_python_producer_over_the_wire(
    api_version: tuple[int, ...], codec: str | None, produce_version: int
) -> None:
    from kafka import KafkaProducer

    async with log_broker() as b:
        versions = observe(b)

        def send() -> list[Any]:
            producer = KafkaProducer(
                bootstrap_servers=f"127.0.0.1:{b.port(PLAINTEXT)}", api_version=api_version,
                compression_type=codec, linger_ms=5,
            )  # fmt: skip
            try:
                futures = [producer.send(TOPIC, value=b"old-%d" % i, partition=1) for i in range(50)]
                producer.flush(10)
                return [f.get(10) for f in futures]
            finally:
                producer.close(5)

        sent = await asyncio.to_thread(send)
        assert sorted(m.offset for m in sent) == list(range(50))
        records = await read_all(b, 1)
        assert [r[3] for r in records] == [b"old-%d" % i for i in range(50)]
        assert [r[0] for r in records] == list(range(50))
        assert versions.seen[0] == {produce_version}  # (magic 0 before 0.10, magic 1 from it)


async def test_a_large_legacy_set_is_converted_while_other_connections_are_served() -> None:
    """~1 MB of small legacy records takes ~0.1 s to convert: a worker thread does it, and the
    partition gets every record once, in order (the v2 batch it becomes fits max.message.bytes)."""
    values = [b"%05d" % i + b"x" * 100 for i in range(7000)]
    data = legacy(1, NONE, values)
    assert len(data) > 900_000
    async with log_broker() as b:
        slow = await KafkaConnection.open("127.0.0.1", b.port(PLAINTEXT))
        quick = await KafkaConnection.open("127.0.0.1", b.port(PLAINTEXT))
        big = asyncio.ensure_future(produce(slow, 0, data, version=2))
        small = await produce(quick, 1, legacy(1, NONE, [b"q"]), version=2)
        done = await big
        slow.close()
        quick.close()
        assert (small.error_code, done.error_code, done.base_offset) == (0, 0, 0)
        assert [r[3] for r in await read_all(b)] == values
