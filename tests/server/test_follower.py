"""The follower's side of replication (issue 29): two real brokers on loopback, the test as
their controller. A follower fetches from its leader's control listener, starts at the
leader's log start when its own log is empty and the leader's starts later, and truncates
what diverges from the leader's log by the diverging epoch of Fetch v12+. Kafka's truncation
rule itself (``getOffsetTruncationState``) is checked case by case on a log."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from kmeta.log.config import LogConfig
from kmeta.log.partition_log import PartitionLog
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import produce as pr
from kmeta.server.broker import Broker
from kmeta.server.fetcher.follower_truncation import truncation_offset
from tests.server.data_plane import Part, as_stored, batch, leader_and_isr, metadata_for, only
from tests.server.helpers import CONTROL, PLAINTEXT, live_broker, loopback_config


@asynccontextmanager
async def two_brokers() -> AsyncIterator[tuple[Broker, Broker]]:
    brokers = [Broker(loopback_config(1)), Broker(loopback_config(2))]
    for b in brokers:
        await b.start()
    try:
        yield brokers[0], brokers[1]
    finally:
        for b in brokers:
            await b.stop()


async def assign(brokers: tuple[Broker, ...], parts: list[Part]) -> None:
    """What the controller sends each broker: both brokers' endpoints and ``r``'s states."""
    live = [
        live_broker(b.config.broker_id, {PLAINTEXT: ("127.0.0.1", b.port(PLAINTEXT)), CONTROL: ("127.0.0.1", b.port(CONTROL))})
        for b in brokers
    ]
    for b in brokers:
        conn = await KafkaConnection.open("127.0.0.1", b.port(CONTROL))
        try:
            assert (await conn.request(metadata_for({"r": parts}, live), 10)).error_code == 0
            assert (await conn.request(leader_and_isr({"r": parts}), 10)).error_code == 0
        finally:
            conn.close()


async def produce(broker: Broker, records: bytes, acks: int = 1) -> Any:
    conn = await KafkaConnection.open("127.0.0.1", broker.port(PLAINTEXT))
    try:
        data = (pr.TopicProduceData("r", (pr.PartitionProduceData(0, records),)),)
        return only(await conn.request(pr.ProduceRequest(version=9, acks=acks, timeout_ms=5000, topic_data=data), 10))
    finally:
        conn.close()


def log_of(broker: Broker) -> PartitionLog | None:
    return broker.state.replica_manager.log_manager.get("r", 0)


async def until(check: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        await asyncio.sleep(0.02)


async def test_an_empty_follower_starts_at_the_leaders_log_start_and_acks_all_waits_for_it() -> None:
    async with two_brokers() as (one, two):
        await assign((one, two), [(0, 1, (1,), (1,), 4)])  # (broker 2 is no replica yet)
        for _ in range(5):
            assert (await produce(one, batch(2))).error_code == 0
        leader = log_of(one)
        assert leader is not None
        leader.delete_records_before(6)
        # broker 2 becomes a replica with an empty log: it fetches from 0, is told
        # OFFSET_OUT_OF_RANGE and starts where the leader's log starts (the batch holding 6)
        await assign((one, two), [(0, 1, (1, 2), (1, 2), 5)])
        await until(lambda: (f := log_of(two)) is not None and f.log_end_offset == 10)
        follower = log_of(two)
        assert follower is not None
        assert (follower.log_start_offset, follower.high_watermark) == (6, 10)
        # acks=-1 answers once broker 2 has the batch
        data = batch(3)
        answer = await produce(one, data, acks=-1)
        assert (answer.error_code, answer.base_offset) == (0, 10)
        assert follower.log_end_offset == 13
        assert bytes(follower.read(10, 1 << 20, None).records) == as_stored(data, 10, 5)
        await until(lambda: follower.high_watermark == 13)  # (the leader's, on its next fetch)


async def test_a_follower_truncates_what_diverges_from_its_new_leader() -> None:
    async with two_brokers() as (one, two):
        await assign((one, two), [(0, 1, (1,), (1,), 4)])
        assert (await produce(one, batch(3))).error_code == 0  # broker 1 alone: offsets 0-2, epoch 4
        # broker 2 (empty) leads epoch 5; broker 1's records after epoch 4's end there (0) go
        await assign((one, two), [(0, 2, (2, 1), (2, 1), 5)])
        data = batch(2)
        assert (await produce(two, data, acks=-1)).error_code == 0
        old = log_of(one)
        assert old is not None
        assert old.log_end_offset == 2
        assert bytes(old.read(0, 1 << 20, None).records) == as_stored(data, 0, 5)
        assert old.end_offset_for_epoch(4).end_offset == 0  # (epoch 4 is gone but where it ended)


def _log(epochs: list[tuple[int, int]], end: int) -> PartitionLog:
    """A log of one-record batches up to ``end``, epoch e from each (e, start)."""
    log = PartitionLog("t", 0, None, LogConfig())
    for offset in range(end):
        epoch = max(e for e, start in epochs if start <= offset)
        log.append_as_leader(batch(1), epoch, 0)
    log.update_high_watermark(1)
    return log


def test_the_truncation_offset_follows_kafkas_rules() -> None:
    log = _log([(1, 0), (3, 4)], 8)  # epoch 1: 0-3, epoch 3: 4-7; high watermark 1
    assert truncation_offset(log, 3, 6, 8) == (6, True)  # same epoch, the leader's ends first
    assert truncation_offset(log, 3, 9, 8) == (8, True)  # ours ends first
    assert truncation_offset(log, 2, 5, 8) == (4, False)  # epoch 2 unknown here: ours of 1, again
    assert truncation_offset(log, 1, 3, 8) == (3, True)
    assert truncation_offset(log, 0, 2, 8) == (0, True)  # before our first epoch: nothing of it here
    assert truncation_offset(log, -1, 5, 8) == (5, True)  # no epoch named: its end offset
    assert truncation_offset(log, 3, -1, 8) == (1, True)  # the leader cannot say: our high watermark
