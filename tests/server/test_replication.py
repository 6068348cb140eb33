"""The leader's side of replication on a real broker over loopback (issue 29): broker 1 leads
``r-0`` with broker 2 as its follower; the test plays broker 2 with replica fetches.

The high watermark is the smallest log end over the ISR; acks=-1 waits until it covers the
batch (or ``timeout_ms``: REQUEST_TIMED_OUT); min.insync.replicas refuses before the append
(NOT_ENOUGH_REPLICAS) and after it when the ISR shrank meanwhile
(NOT_ENOUGH_REPLICAS_AFTER_APPEND); a fetch from a broker that is not a replica, or naming an
older broker epoch than that replica fetched with, is refused and changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode as E
from kmeta.protocol.messages import fetch as fe
from kmeta.protocol.messages import produce as pr
from kmeta.server.broker import Broker
from kmeta.server.config import BrokerConfig, ListenerSpec
from tests.server.data_plane import (
    Part,
    as_stored,
    batch,
    fetch,
    leader_and_isr,
    metadata_for,
    only,
)
from tests.server.helpers import CONTROL, PLAINTEXT, live_broker

EPOCH = 4


def _topics(isr: tuple[int, ...], epoch: int = EPOCH, partitions: int = 1) -> dict[str, list[Part]]:
    return {"r": [(index, 1, (1, 2), isr, epoch) for index in range(partitions)]}


@asynccontextmanager
async def leading(
    min_isr: int = 1, isr: tuple[int, ...] = (1, 2), partitions: int = 1
) -> AsyncIterator[tuple[Broker, KafkaConnection]]:
    """Broker 1 leading ``r-0`` (and up to ``r-<partitions - 1>``; replicas 1, 2) with
    ``isr``; a client connection to it (answers leave a connection in order: a waiting
    produce goes on one of its own)."""
    broker = Broker(BrokerConfig(
        broker_id=1, listeners=(ListenerSpec(PLAINTEXT, "127.0.0.1", 0), ListenerSpec(CONTROL, "127.0.0.1", 0)),
        cluster_id="kmeta-test",
    ))  # fmt: skip
    await broker.start()
    conn = await KafkaConnection.open("127.0.0.1", broker.port(PLAINTEXT))
    try:
        topics = _topics(isr, partitions=partitions)
        await control(broker, metadata_for(topics, _brokers(broker), configs={"r": {"min.insync.replicas": str(min_isr)}}))
        await control(broker, leader_and_isr(topics))
        yield broker, conn
    finally:
        conn.close()
        await broker.stop()


def _brokers(broker: Broker) -> list[Any]:
    return [live_broker(1, {PLAINTEXT: ("127.0.0.1", broker.port(PLAINTEXT))}),
            live_broker(2, {PLAINTEXT: ("127.0.0.1", 9092)})]  # fmt: skip


async def control(broker: Broker, request: Any) -> None:
    conn = await KafkaConnection.open("127.0.0.1", broker.port(CONTROL))
    try:
        assert (await conn.request(request, 10)).error_code == 0
    finally:
        conn.close()


def produce(records: bytes, *, acks: int = -1, timeout_ms: int = 10_000, partition: int = 0) -> pr.ProduceRequest:
    return produce_to({partition: records}, acks=acks, timeout_ms=timeout_ms)


def produce_to(batches: dict[int, bytes], *, acks: int = -1, timeout_ms: int = 10_000) -> pr.ProduceRequest:
    """One Produce of a batch to each ``r-<index>``."""
    data = (pr.TopicProduceData("r", tuple(pr.PartitionProduceData(i, b) for i, b in batches.items())),)
    return pr.ProduceRequest(version=9, acks=acks, timeout_ms=timeout_ms, topic_data=data)


async def request_alone(beside: KafkaConnection, request: Any) -> Any:
    """``request`` on a connection of its own to the broker ``beside`` talks to."""
    peer = beside.peer()
    assert peer is not None
    conn = await KafkaConnection.open(*peer)
    try:
        return await conn.request(request, 10)
    finally:
        conn.close()


async def replica_fetch(conn: KafkaConnection, offset: int, *, replica: int = 2, broker_epoch: int = 7) -> Any:
    """Broker ``replica``'s fetch from ``offset`` (Fetch v15: ReplicaState with its epoch)."""
    request = fetch([("r", 0, offset)], version=15, replica_id=replica)
    request = request._replace(replica_state=fe.ReplicaState(replica, broker_epoch))
    return only(await conn.request(request, 10))


async def high_watermark(conn: KafkaConnection) -> int:
    return int(only(await conn.request(fetch([("r", 0, 0)]), 10)).high_watermark)


async def test_acks_all_answers_once_the_follower_has_fetched_the_batch() -> None:
    async with leading() as (_, conn):
        data = batch(3)
        answer = asyncio.ensure_future(request_alone(conn, produce(data)))
        await asyncio.sleep(0.2)
        assert not answer.done()  # (broker 2 has not fetched it)
        consumer = only(await conn.request(fetch([("r", 0, 0)]), 10))
        assert (consumer.high_watermark, bytes(consumer.records)) == (0, b"")  # (not past the HW)
        first = await replica_fetch(conn, 0)
        assert (first.error_code, bytes(first.records), first.high_watermark) == (0, as_stored(data, 0, EPOCH), 0)
        assert not answer.done()  # (fetching from 0 says its log ends at 0)
        await replica_fetch(conn, 3)  # its log ends at 3 now: the ISR's smallest log end
        assert only(await asyncio.wait_for(answer, 5)).error_code == E.NONE
        assert await high_watermark(conn) == 3
        # acks=1 answers at once; the high watermark waits for broker 2 again
        assert only(await conn.request(produce(batch(2), acks=1), 10)).base_offset == 3
        assert await high_watermark(conn) == 3


async def test_acks_all_times_out_when_the_follower_does_not_fetch() -> None:
    async with leading() as (_, conn):
        started = asyncio.get_running_loop().time()
        answer = only(await conn.request(produce(batch(1), timeout_ms=300), 10))
        assert answer.error_code == E.REQUEST_TIMED_OUT
        assert asyncio.get_running_loop().time() - started >= 0.3
        # appended all the same (Kafka's DelayedProduce): the follower's fetch finds it
        assert (await replica_fetch(conn, 0)).records


async def test_min_insync_replicas_before_and_after_the_append() -> None:
    async with leading(min_isr=2, isr=(1,)) as (_, conn):
        refused = only(await conn.request(produce(batch(1)), 10))
        assert refused.error_code == E.NOT_ENOUGH_REPLICAS
        assert not (await replica_fetch(conn, 0)).records  # (nothing appended)
    async with leading(min_isr=2, isr=(1, 2)) as (broker, conn):
        answer = asyncio.ensure_future(request_alone(conn, produce(batch(1))))
        await asyncio.sleep(0.2)
        assert not answer.done()
        # the controller drops broker 2 from the ISR: the high watermark covers the batch now,
        # with one in-sync replica of the two required
        await control(broker, leader_and_isr(_topics((1,), EPOCH + 1)))
        assert only(await asyncio.wait_for(answer, 5)).error_code == E.NOT_ENOUGH_REPLICAS_AFTER_APPEND


async def test_strangers_and_stale_broker_epochs_are_refused_and_change_nothing() -> None:
    async with leading() as (_, conn):
        await conn.request(produce(batch(2), acks=1), 10)
        stranger = await replica_fetch(conn, 2, replica=3)
        assert (stranger.error_code, bytes(stranger.records)) == (E.NOT_LEADER_OR_FOLLOWER, b"")
        assert await high_watermark(conn) == 0  # (broker 3's "log end" counted nowhere)
        assert (await replica_fetch(conn, 0, broker_epoch=7)).error_code == E.NONE
        # an earlier incarnation of broker 2 (an older epoch) claims to hold everything
        stale = await replica_fetch(conn, 2, broker_epoch=6)
        assert (stale.error_code, bytes(stale.records)) == (E.NOT_LEADER_OR_FOLLOWER, b"")
        assert await high_watermark(conn) == 0
        assert (await replica_fetch(conn, 2, broker_epoch=8)).error_code == E.NONE  # (a newer one)
        assert await high_watermark(conn) == 2


async def test_a_waiting_follower_fetch_is_answered_after_all_of_a_produces_appends() -> None:
    """Kafka's action queue: a follower's fetch waiting on ``r-0`` and ``r-1`` is woken once
    the Produce's appends are all done, so one answer carries both batches (woken after the
    first append, it carried ``r-0``'s alone and ``r-1``'s waited for the next fetch)."""
    async with leading(partitions=2) as (_, conn):
        for index in (0, 1):
            assert only(await conn.request(produce(batch(2), acks=1, partition=index), 10)).error_code == 0
        request = fetch([("r", 0, 2), ("r", 1, 2)], version=15, replica_id=2, max_wait_ms=10_000)
        request = request._replace(replica_state=fe.ReplicaState(2, 7))
        waiting = asyncio.ensure_future(request_alone(conn, request))
        await asyncio.sleep(0.2)
        assert not waiting.done()  # (at both log ends: it waits)
        first, second = batch(3), batch(4)
        answer = await conn.request(produce_to({0: first, 1: second}, acks=1), 10)
        assert [p.error_code for t in answer.responses for p in t.partition_responses] == [0, 0]
        read = await asyncio.wait_for(waiting, 5)
        records = {p.partition_index: bytes(p.records) for t in read.responses for p in t.partitions}
        assert records == {0: as_stored(first, 2, EPOCH), 1: as_stored(second, 2, EPOCH)}
