"""Idempotent and transactional producers at the broker, over loopback with raw requests:
Produce's sequence checks and duplicate answers, WriteTxnMarkers from the control listener,
read_committed Fetch (last stable offset, aborted transactions) and ListOffsets, and
DescribeProducers. Batches from kafka-python's encoder."""

from __future__ import annotations

import asyncio
import time
import warnings
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode as E
from kmeta.protocol.messages import describe_producers as dp
from kmeta.protocol.messages import list_offsets as lo
from kmeta.protocol.messages import write_txn_markers as wtm
from kmeta.server.broker import Broker
from tests.server.data_plane import Part, fetch, only, produce, started_broker
from tests.server.helpers import CONTROL, PLAINTEXT

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")

#: broker 1 leads orders-0 (ISR 1 alone: committed at once) and follows orders-1
TOPICS: dict[str, list[Part]] = {"orders": [(0, 1, (1, 2), (1,), 4), (1, 2, (2, 1), (2, 1), 7)]}


def records(seq: int, n: int = 1, *, pid: int = 500, epoch: int = 0, txn: bool = False) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=txn, producer_id=pid,
        producer_epoch=epoch, base_sequence=seq, batch_size=1 << 24,
    )  # fmt: skip
    for i in range(n):
        builder.append(i, timestamp=1_000 + i, key=None, value=b"r%d" % (seq + i), headers=[])
    return bytes(builder.build())


def markers(*marks: tuple[int, int, bool, int, list[int]], version: int = 1) -> wtm.WriteTxnMarkersRequest:
    """(producer id, epoch, commit, coordinator epoch, orders partitions) each."""
    return wtm.WriteTxnMarkersRequest(version=version, markers=tuple(
        wtm.WritableTxnMarker(pid, epoch, commit, (wtm.WritableTxnMarkerTopic("orders", tuple(ps)),), coord)
        for pid, epoch, commit, coord, ps in marks
    ))  # fmt: skip


def marker_errors(answer: wtm.WriteTxnMarkersResponse) -> list[dict[int, int]]:
    return [{p.partition_index: p.error_code for t in m.topics for p in t.partitions} for m in answer.markers]


def latest(isolation: int) -> lo.ListOffsetsRequest:
    part = lo.ListOffsetsPartition(partition_index=0, timestamp=-1)
    return lo.ListOffsetsRequest(version=5, replica_id=-1, isolation_level=isolation, topics=(lo.ListOffsetsTopic("orders", (part,)),))


async def _open(broker: Broker) -> tuple[KafkaConnection, KafkaConnection]:
    client = await KafkaConnection.open("127.0.0.1", broker.port(PLAINTEXT))
    control = await KafkaConnection.open("127.0.0.1", broker.port(CONTROL))
    return client, control


async def test_idempotent_produce_retries_gaps_and_epochs() -> None:
    broker = await started_broker(TOPICS)
    client, _ = await _open(broker)
    try:
        async def send(data: bytes) -> Any:
            return only(await client.request(produce("orders", 0, data), 10))

        assert (await send(records(0, 3))).base_offset == 0
        assert (await send(records(3, 2))).base_offset == 3
        retry = await send(records(0, 3))  # the client's retry: NONE, the original offset
        assert (retry.error_code, retry.base_offset, retry.log_append_time_ms) == (0, 0, 1_002)
        gap = await send(records(9))
        assert gap.error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert "Out of order sequence number" in gap.error_message
        assert (await send(records(0, epoch=1))).base_offset == 5  # a bump starts at 0
        assert (await send(records(1, epoch=0))).error_code == E.INVALID_PRODUCER_EPOCH
        assert broker.state.replica_manager.log_manager.get("orders", 0).log_end_offset == 6
    finally:
        client.close()
        await broker.stop()


async def test_markers_read_committed_and_describe_producers() -> None:
    broker = await started_broker(TOPICS)
    client, control = await _open(broker)
    rm = broker.state.replica_manager
    try:
        partition, _ = rm.leader_partition_or_error("orders", 0)
        assert partition is not None
        # the transaction's first batch, as the coordinator's verification would let it in
        assert rm.append_records(partition, records(0, 2, txn=True), -1, 1).first_offset == 0
        # a transactional batch without a transaction open here: no coordinator vouches for it
        # (none can be asked: NOT_ENOUGH_REPLICAS, retried by the producer, as Kafka maps it)
        refused = only(await client.request(produce("orders", 0, records(0, txn=True, pid=9), txn="t9"), 10))
        assert refused.error_code == E.NOT_ENOUGH_REPLICAS
        # the open transaction goes on; a plain producer writes after it
        assert only(await client.request(produce("orders", 0, records(2, txn=True), txn="t"), 10)).base_offset == 2
        assert only(await client.request(produce("orders", 0, records(0, pid=600)), 10)).base_offset == 3
        committed = only(await client.request(fetch([("orders", 0, 0)], isolation_level=1), 10))
        assert (committed.high_watermark, committed.last_stable_offset, bytes(committed.records)) == (4, 0, b"")
        uncommitted = only(await client.request(fetch([("orders", 0, 0)]), 10))
        assert len(bytes(uncommitted.records)) > 0
        assert (await client.request(latest(1), 10)).topics[0].partitions[0].offset == 0
        assert (await client.request(latest(0), 10)).topics[0].partitions[0].offset == 4

        described = await client.request(dp.DescribeProducersRequest(topics=(dp.TopicRequest("orders", (0, 1, 5)),)), 10)
        mine, follower, unknown = described.topics[0].partitions
        by_id = {p.producer_id: p for p in mine.active_producers}
        assert (by_id[500].last_sequence, by_id[500].current_txn_start_offset) == (2, 0)
        assert (by_id[600].last_sequence, by_id[600].current_txn_start_offset) == (0, -1)
        assert (follower.error_code, follower.active_producers) == (0, ())  # (a replica here too)
        assert unknown.error_code == E.UNKNOWN_TOPIC_OR_PARTITION

        # markers: only on the control listener; stale epochs; a follower; an unknown partition
        on_client = await client.request(markers((500, 0, False, 3, [0])), 10)
        assert marker_errors(on_client) == [{0: E.CLUSTER_AUTHORIZATION_FAILED}]
        stale = await control.request(markers((500, -1, False, 3, [0, 1, 9])), 10)
        assert marker_errors(stale) == [
            {0: E.INVALID_PRODUCER_EPOCH, 1: E.NOT_LEADER_OR_FOLLOWER, 9: E.UNKNOWN_TOPIC_OR_PARTITION}
        ]
        aborted = await control.request(markers((500, 0, False, 3, [0]), (600, 0, True, 3, [0]), version=0), 10)
        assert marker_errors(aborted) == [{0: E.NONE}, {0: E.NONE}]
        assert [m.producer_id for m in aborted.markers] == [500, 600]
        fenced = await control.request(markers((500, 0, True, 2, [0])), 10)
        assert marker_errors(fenced) == [{0: E.TRANSACTION_COORDINATOR_FENCED}]

        committed = only(await client.request(fetch([("orders", 0, 0)], isolation_level=1), 10))
        assert committed.last_stable_offset == committed.high_watermark == 6
        assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [(500, 0)]
        assert len(bytes(committed.records)) > 0
        past = only(await client.request(fetch([("orders", 0, 5)], isolation_level=1), 10))
        assert past.aborted_transactions == ()  # (the abort ended before offset 5)
        assert only(await client.request(fetch([("orders", 0, 0)]), 10)).aborted_transactions is None
        assert (await client.request(latest(1), 10)).topics[0].partitions[0].offset == 6
    finally:
        client.close()
        control.close()
        await broker.stop()


def _consume(bootstrap: str, isolation: str, want_end: int) -> list[bytes]:
    """confluent-kafka's consumer (librdkafka) from offset 0 until its position passes
    ``want_end``: the values it hands the application."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
        "isolation.level": isolation, "log_level": 0,
    })  # fmt: skip
    try:
        consumer.assign([TopicPartition("orders", 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for m in consumer.consume(100, 0.2):
                if m.error() is None:
                    got.append(m.value())
            if consumer.position([TopicPartition("orders", 0)])[0].offset >= want_end:
                break
        return got
    finally:
        consumer.close()


def _kafka_python(bootstrap: str, isolation: str) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, consumer_timeout_ms=3000)
    try:
        consumer.assign([TopicPartition("orders", 0)])
        consumer.seek(TopicPartition("orders", 0), 0)
        return [m.value for m in consumer]
    finally:
        consumer.close()


async def test_real_consumers_skip_aborted_records_under_read_committed() -> None:
    """The aborted-transactions list and the control batches as librdkafka and kafka-python
    read them: read_committed hands over committed and plain records only, read_uncommitted
    every data record; neither hands over a marker."""
    broker = await started_broker(TOPICS)
    _, control = await _open(broker)
    rm = broker.state.replica_manager
    try:
        partition, _ = rm.leader_partition_or_error("orders", 0)
        assert partition is not None
        rm.append_records(partition, records(0, 2, txn=True, pid=500), -1, 1)  # r0 r1, aborted
        rm.append_records(partition, records(0, 1, txn=True, pid=600), -1, 1)  # r0, committed
        rm.append_records(partition, records(7, 1, pid=700), -1, 1)  # r7, plain idempotent
        rm.append_records(partition, records(2, 1, txn=True, pid=500), -1, 1)  # r2, aborted
        answer = await control.request(markers((500, 0, False, 0, [0]), (600, 0, True, 0, [0])), 10)
        assert marker_errors(answer) == [{0: E.NONE}, {0: E.NONE}]
        bootstrap = f"127.0.0.1:{broker.port(PLAINTEXT)}"
        committed = await asyncio.to_thread(_consume, bootstrap, "read_committed", 7)
        assert committed == [b"r0", b"r7"]  # (pid 600's r0, then the plain r7)
        uncommitted = await asyncio.to_thread(_consume, bootstrap, "read_uncommitted", 7)
        assert uncommitted == [b"r0", b"r1", b"r0", b"r7", b"r2"]
        assert await asyncio.to_thread(_kafka_python, bootstrap, "read_committed") == [b"r0", b"r7"]
    finally:
        control.close()
        await broker.stop()


async def test_internal_topics_take_their_coordinators_batches_without_sequence_checks() -> None:
    """The coordinator runtime's transactional writes (TxnOffsetCommit's records) all carry
    sequence 0: on an internal topic the replica manager appends them as Kafka's origin
    COORDINATOR, epoch-checked only; the same batches on a client's topic are retries."""
    topics: dict[str, list[Part]] = {**TOPICS, "__consumer_offsets": [(0, 1, (1,), (1,), 1)]}
    broker = await started_broker(topics)
    rm = broker.state.replica_manager
    try:
        internal, _ = rm.leader_partition_or_error("__consumer_offsets", 0)
        plain, _ = rm.leader_partition_or_error("orders", 0)
        assert internal is not None
        assert plain is not None
        assert [rm.append_records(internal, records(0, txn=True), -1, 1).first_offset for _ in range(3)] == [0, 1, 2]
        assert [rm.append_records(plain, records(0, txn=True), -1, 1).first_offset for _ in range(3)] == [0, 0, 0]
        assert rm.append_records(internal, records(0, txn=True, epoch=-1), -1, 1)[0] == E.INVALID_PRODUCER_EPOCH
    finally:
        await broker.stop()


async def test_a_read_committed_long_poll_is_answered_when_the_commit_lands() -> None:
    broker = await started_broker(TOPICS)
    client, control = await _open(broker)
    rm = broker.state.replica_manager
    try:
        partition, _ = rm.leader_partition_or_error("orders", 0)
        assert partition is not None
        rm.append_records(partition, records(0, 3, txn=True), -1, 1)
        waiting = asyncio.ensure_future(
            client.request(fetch([("orders", 0, 0)], isolation_level=1, max_wait_ms=20_000), 30)
        )
        await asyncio.sleep(0.3)
        assert not waiting.done()  # (the transaction is open: nothing committed to read)
        started = time.monotonic()
        assert marker_errors(await control.request(markers((500, 0, True, 0, [0])), 10)) == [{0: E.NONE}]
        part = only(await asyncio.wait_for(waiting, 10))
        assert time.monotonic() - started < 5  # (woken by the commit, not the 20 s timer)
        assert (part.last_stable_offset, part.aborted_transactions) == (4, ())
        assert len(bytes(part.records)) > 0
    finally:
        client.close()
        control.close()
        await broker.stop()


async def test_read_committed_past_the_last_stable_offset_waits_for_the_transaction() -> None:
    """A read_committed consumer whose position is past the last stable offset (below the
    high watermark: a group offset a read_uncommitted consumer committed) waits, as Kafka's
    DelayedFetch does, instead of being answered empty at once in a busy loop."""
    broker = await started_broker(TOPICS)
    client, control = await _open(broker)
    rm = broker.state.replica_manager
    try:
        partition, _ = rm.leader_partition_or_error("orders", 0)
        assert partition is not None
        rm.append_records(partition, records(0, 3, txn=True), -1, 1)  # offsets 0-2, open
        rm.append_records(partition, records(0, 1, pid=700), -1, 1)  # offset 3
        waiting = asyncio.ensure_future(
            client.request(fetch([("orders", 0, 3)], isolation_level=1, max_wait_ms=20_000), 30)
        )
        await asyncio.sleep(0.5)
        assert not waiting.done()
        assert marker_errors(await control.request(markers((500, 0, False, 0, [0])), 10)) == [{0: E.NONE}]
        part = only(await asyncio.wait_for(waiting, 10))
        assert (part.last_stable_offset, len(bytes(part.records)) > 0) == (5, True)
        # (the abort's marker, at 4, is in what was read: the consumer is told)
        assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(500, 0)]
    finally:
        client.close()
        control.close()
        await broker.stop()
