"""OffsetForLeaderEpoch v0-4, DeleteRecords v0-2 and DescribeLogDirs v0-4 against a real
broker over loopback (raw requests, and the admin clients that have them)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode as E
from kmeta.protocol.messages import delete_records as dr
from kmeta.protocol.messages import describe_log_dirs as dld
from kmeta.protocol.messages import fetch as fe
from kmeta.protocol.messages import list_offsets as lo
from kmeta.protocol.messages import offset_for_leader_epoch as ofle
from kmeta.server.broker import Broker
from tests.server.helpers import PLAINTEXT
from tests.server.log_broker import (
    EPOCH,
    TOPIC,
    batch,
    log_broker,
    move_leadership,
    observe,
    produce,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


async def request(b: Broker, req: Any) -> Any:
    conn = await KafkaConnection.open("127.0.0.1", b.port(PLAINTEXT))
    try:
        return await conn.request(req, 10)
    finally:
        conn.close()


async def fill(b: Broker, index: int, batches: int, per_batch: int = 2) -> None:
    conn = await KafkaConnection.open("127.0.0.1", b.port(PLAINTEXT))
    try:
        for i in range(batches):
            resp = await produce(conn, index, batch([b"r%d-%d" % (i, j) for j in range(per_batch)]))
            assert resp.error_code == 0
    finally:
        conn.close()


# -- OffsetForLeaderEpoch -------------------------------------------------------------------


async def end_offsets(b: Broker, asks: list[tuple[int, int, int]], version: int = 4) -> list[tuple[int, int, int]]:
    """(partition, current leader epoch, leader epoch) -> (error, leader epoch, end offset)."""
    req = ofle.OffsetForLeaderEpochRequest(
        version=version, replica_id=-1,
        topics=(ofle.OffsetForLeaderTopic(TOPIC, tuple(ofle.OffsetForLeaderPartition(p, c, e) for p, c, e in asks)),),
    )  # fmt: skip
    resp = await request(b, req)
    return [(p.error_code, p.leader_epoch, p.end_offset) for t in resp.topics for p in t.partitions]


async def test_end_offsets_per_epoch_across_a_leader_epoch_change() -> None:
    async with log_broker() as b:
        # becoming leader at epoch 5 started that epoch at the log end (Partition.makeLeader)
        assert await end_offsets(b, [(0, -1, EPOCH)]) == [(E.NONE, EPOCH, 0)]
        assert await end_offsets(b, [(0, -1, -1)]) == [(E.NONE, -1, -1)]  # (no epoch asked)
        await fill(b, 0, 3)  # offsets 0-5 at epoch 5
        await move_leadership(b, 0, 1, EPOCH + 2)  # re-elected here at epoch 7
        await fill(b, 0, 1)  # offsets 6-7 at epoch 7
        assert await end_offsets(b, [(0, -1, EPOCH), (0, -1, EPOCH + 1), (0, -1, EPOCH + 2), (0, -1, 2)]) == [
            (E.NONE, EPOCH, 6),  # epoch 5 ends where epoch 7 starts
            (E.NONE, EPOCH, 6),  # no epoch 6: the largest below it
            (E.NONE, EPOCH + 2, 8),  # the latest epoch: the log end
            (E.NONE, 2, 0),  # below the first entry: the first entry's start
        ]
        assert await end_offsets(b, [(0, EPOCH, EPOCH)]) == [(E.FENCED_LEADER_EPOCH, -1, -1)]
        assert await end_offsets(b, [(0, EPOCH + 3, EPOCH)]) == [(E.UNKNOWN_LEADER_EPOCH, -1, -1)]
        assert await end_offsets(b, [(2, -1, EPOCH), (9, -1, EPOCH)]) == [
            (E.NOT_LEADER_OR_FOLLOWER, -1, -1), (E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
        ]  # fmt: skip
        for version in range(4):  # v0 has no leader epoch in the answer
            got = await end_offsets(b, [(0, -1, EPOCH)], version=version)
            assert got == [(E.NONE, -1 if version == 0 else EPOCH, 6)]


# -- DeleteRecords --------------------------------------------------------------------------


async def delete(b: Broker, offsets: list[tuple[int, int]], version: int = 2, topic: str = TOPIC) -> list[tuple[int, int]]:
    req = dr.DeleteRecordsRequest(
        version=version, timeout_ms=5000,
        topics=(dr.DeleteRecordsTopic(topic, tuple(dr.DeleteRecordsPartition(p, o) for p, o in offsets)),),
    )  # fmt: skip
    resp = await request(b, req)
    return [(p.error_code, p.low_watermark) for t in resp.topics for p in t.partitions]


async def earliest(b: Broker, index: int = 0) -> int:
    req = lo.ListOffsetsRequest(
        version=9, replica_id=-1, topics=(lo.ListOffsetsTopic(TOPIC, (lo.ListOffsetsPartition(index, -1, -2),)),)
    )
    resp = await request(b, req)
    return int(resp.topics[0].partitions[0].offset)


async def test_delete_records_moves_the_log_start_and_fetches_below_it_fail() -> None:
    async with log_broker() as b:
        await fill(b, 0, 5)  # offsets 0-9
        assert await delete(b, [(0, 4)]) == [(E.NONE, 4)]
        assert await earliest(b) == 4
        assert await delete(b, [(0, 2)]) == [(E.NONE, 4)]  # (below the log start: nothing moves)
        assert await delete(b, [(0, 11), (1, -5)]) == [(E.OFFSET_OUT_OF_RANGE, -1), (E.OFFSET_OUT_OF_RANGE, -1)]
        fetch = fe.FetchRequest(
            version=12, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
            topics=(fe.FetchTopic(topic=TOPIC, partitions=(fe.FetchPartition(partition=0, fetch_offset=2,
                                                                               partition_max_bytes=1 << 20),)),),
        )  # fmt: skip
        resp = await request(b, fetch)
        assert resp.responses[0].partitions[0].error_code == E.OFFSET_OUT_OF_RANGE
        assert await delete(b, [(0, -1)], version=0) == [(E.NONE, 10)]  # -1: the high watermark
        assert await earliest(b) == 10


async def test_delete_records_refusals() -> None:
    extra = {"compacted": {"cleanup.policy": "compact"}, "both": {"cleanup.policy": "compact,delete"},
             "__consumer_offsets": {}}  # fmt: skip
    async with log_broker(extra=extra) as b:
        assert await delete(b, [(2, 0), (5, 0)], version=1) == [
            (E.NOT_LEADER_OR_FOLLOWER, -1), (E.UNKNOWN_TOPIC_OR_PARTITION, -1),
        ]  # fmt: skip
        assert await delete(b, [(0, 0)], topic="nope") == [(E.UNKNOWN_TOPIC_OR_PARTITION, -1)]
        assert await delete(b, [(0, 0)], topic="compacted") == [(E.POLICY_VIOLATION, -1)]
        assert await delete(b, [(0, 0)], topic="both") == [(E.NONE, 0)]
        assert await delete(b, [(0, 0)], topic="__consumer_offsets") == [(E.INVALID_TOPIC_EXCEPTION, -1)]


async def test_confluent_admin_delete_records() -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    async with log_broker() as b:
        await fill(b, 1, 3)

        def run() -> int:
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{b.port(PLAINTEXT)}"})
            futures = admin.delete_records([TopicPartition(TOPIC, 1, 3)], operation_timeout=5)
            return int(futures[TopicPartition(TOPIC, 1, 3)].result(10).low_watermark)

        assert await asyncio.to_thread(run) == 3
        assert await earliest(b, 1) == 3


# -- DescribeLogDirs ------------------------------------------------------------------------


async def describe(b: Broker, version: int = 4, topics: Any = None) -> Any:
    return await request(b, dld.DescribeLogDirsRequest(version=version, topics=topics))


def sizes(result: Any) -> dict[tuple[str, int], tuple[int, int, bool]]:
    return {
        (t.name, p.partition_index): (p.partition_size, p.offset_lag, p.is_future_key)
        for t in result.topics
        for p in t.partitions
    }


async def test_describe_log_dirs_in_memory() -> None:
    async with log_broker(log_memory_max_bytes=8 << 20) as b:
        await fill(b, 0, 2)
        await fill(b, 1, 1)
        resp = await describe(b)
        (result,) = resp.results
        assert (result.error_code, result.log_dir) == (E.NONE, "memory")
        held = sizes(result)
        assert set(held) == {(TOPIC, 0), (TOPIC, 1)}
        # (the stored batches, byte for byte: what fill() sent, base offset and epoch aside)
        sent = [len(batch([b"r%d-%d" % (i, j) for j in range(2)])) for i in range(2)]
        assert (held[(TOPIC, 0)][0], held[(TOPIC, 1)][0]) == (sum(sent), sent[0])
        assert {v[1:] for v in held.values()} == {(0, False)}
        assert result.total_bytes == 8 << 20
        assert result.usable_bytes == (8 << 20) - sum(v[0] for v in held.values())
        only = await describe(b, 1, (dld.DescribableLogDirTopic(TOPIC, (1, 9)),))
        assert set(sizes(only.results[0])) == {(TOPIC, 1)}
        assert only.results[0].total_bytes == -1  # (v4 only)
        none = await describe(b, 4, (dld.DescribableLogDirTopic("nope", (0,)),))
        assert none.results[0].topics == ()


async def test_describe_log_dirs_with_a_log_dir(tmp_path: Path) -> None:
    async with log_broker(log_dir=str(tmp_path / "logs")) as b:
        await fill(b, 0, 1)
        (result,) = (await describe(b)).results
        assert result.log_dir == str(tmp_path / "logs")  # (tmp_path is absolute)
        assert set(sizes(result)) == {(TOPIC, 0)}
        stat = os.statvfs(tmp_path)
        assert result.total_bytes == stat.f_blocks * stat.f_frsize
        assert 0 < result.usable_bytes <= result.total_bytes


async def test_kafka_python_describe_log_dirs() -> None:
    from kafka import KafkaAdminClient

    async with log_broker(elsewhere=False) as b:  # (it asks every live broker)
        await fill(b, 0, 1)

        def run() -> Any:
            admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{b.port(PLAINTEXT)}")
            try:
                return admin.describe_log_dirs()
            finally:
                admin.close()

        resp = await asyncio.to_thread(run)
        text = repr(resp)
        assert "memory" in text
        assert TOPIC in text


async def test_describe_log_dirs_answers_a_dir_gone_as_a_storage_error(tmp_path: Path) -> None:
    import shutil

    async with log_broker(log_dir=str(tmp_path / "logs")) as b:
        await fill(b, 0, 1)
        shutil.rmtree(tmp_path / "logs")  # (as a disk that went away)
        (result,) = (await describe(b)).results
        assert (result.error_code, result.log_dir, result.topics) == (E.KAFKA_STORAGE_ERROR, str(tmp_path / "logs"), ())


async def test_offsets_and_a_deletion_survive_a_restart_with_a_log_dir(tmp_path: Path) -> None:
    logs = str(tmp_path / "logs")
    async with log_broker(log_dir=logs) as b:
        await fill(b, 0, 5)  # offsets 0-9
        assert await delete(b, [(0, 4)]) == [(E.NONE, 4)]
        await move_leadership(b, 0, 1, EPOCH + 1)
        await fill(b, 0, 1)  # offsets 10-11 at epoch 6
    async with log_broker(log_dir=logs, epoch=EPOCH + 2) as b:  # (a new broker on the same dir)
        assert await earliest(b) == 4
        req = lo.ListOffsetsRequest(version=9, replica_id=-1, topics=(lo.ListOffsetsTopic(TOPIC, (lo.ListOffsetsPartition(0, -1, -1),)),))
        assert (await request(b, req)).topics[0].partitions[0].offset == 12
        # the epoch cache came back from its checkpoint: epoch 5 ended where 6 began
        assert await end_offsets(b, [(0, -1, EPOCH)]) == [(E.NONE, EPOCH, 10)]
        assert await end_offsets(b, [(0, -1, EPOCH + 1)]) == [(E.NONE, EPOCH + 1, 12)]


async def test_a_librdkafka_consumer_validates_its_position_after_a_leader_epoch_change() -> None:
    """KIP-320: librdkafka sees the new leader epoch (a fetch answered FENCED_LEADER_EPOCH, or
    a metadata refresh), asks OffsetForLeaderEpoch where its epoch ended, and reads on."""
    import time

    from confluent_kafka import Consumer, TopicPartition

    async with log_broker(elsewhere=False) as b:
        versions = observe(b)
        await fill(b, 0, 2)  # offsets 0-3 at epoch 5
        consumer = Consumer({
            "bootstrap.servers": f"127.0.0.1:{b.port(PLAINTEXT)}", "group.id": "unused",
            "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000,
        })  # fmt: skip
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[bytes] = []

        async def poll_until(n: int) -> None:
            deadline = time.monotonic() + 30
            while len(got) < n and time.monotonic() < deadline:
                m = await asyncio.to_thread(consumer.poll, 0.5)
                if m is not None and m.error() is None:
                    got.append(m.value())

        try:
            await poll_until(4)
            await move_leadership(b, 0, 1, EPOCH + 1)
            await fill(b, 0, 1)  # offsets 4-5 at epoch 6
            await poll_until(6)
        finally:
            consumer.close()
        assert got == [b"r%d-%d" % (i, j) for i in range(2) for j in range(2)] + [b"r0-0", b"r0-1"]
        assert 23 in versions.seen  # (OffsetForLeaderEpoch)


async def test_delete_records_keys_the_request_by_partition() -> None:
    async with log_broker() as b:
        await fill(b, 0, 3)  # offsets 0-5
        req = dr.DeleteRecordsRequest(version=2, timeout_ms=1000, topics=(
            dr.DeleteRecordsTopic(TOPIC, (dr.DeleteRecordsPartition(0, 2), dr.DeleteRecordsPartition(1, 0))),
            dr.DeleteRecordsTopic(TOPIC, (dr.DeleteRecordsPartition(0, 4),))))  # fmt: skip
        resp = await request(b, req)
        got = [(t.name, [(p.partition_index, p.error_code, p.low_watermark) for p in t.partitions]) for t in resp.topics]
        assert got == [(TOPIC, [(0, E.NONE, 4), (1, E.NONE, 0)])]  # (the last offset named wins)
