"""Fetch's long poll over loopback: a waiting fetch is answered by the append that satisfies it
(milliseconds, not its max_wait), by its timer when nothing comes, by a leader change, and at
once when the broker stops."""

from __future__ import annotations

import asyncio
import time

import pytest

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode as E
from kmeta.server.broker import Broker
from tests.server.data_plane import (
    Part,
    as_stored,
    batch,
    fetch,
    leader_and_isr,
    only,
    produce,
    started_broker,
)
from tests.server.helpers import CONTROL, PLAINTEXT

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")

ONE: dict[str, list[Part]] = {"events": [(0, 1, (1,), (1,), 3), (1, 1, (1,), (1,), 3)]}


async def _clients(broker: Broker) -> tuple[KafkaConnection, KafkaConnection]:
    port = broker.port(PLAINTEXT)
    return await KafkaConnection.open("127.0.0.1", port), await KafkaConnection.open("127.0.0.1", port)


async def test_a_long_poll_is_woken_by_the_append_in_milliseconds() -> None:
    broker = await started_broker(ONE)
    consumer, producer = await _clients(broker)
    try:
        latencies = []
        for offset in range(5):
            data = batch(1, value=b"event-%d" % offset)
            waiting = asyncio.ensure_future(
                consumer.request(fetch([("events", 0, offset)], max_wait_ms=20_000), 30)
            )
            await asyncio.sleep(0.2)
            assert not waiting.done()  # (nothing to read: it waits)
            t0 = time.monotonic()
            assert only(await producer.request(produce("events", 0, data, acks=1), 10)).error_code == 0
            part = only(await waiting)
            latencies.append(time.monotonic() - t0)
            assert (part.error_code, bytes(part.records)) == (0, as_stored(data, offset, 3))
        # the wake-up is the append's doing: far inside the 20 s max wait
        assert max(latencies) < 1.0, latencies
        print(f"long-poll wake latency: median {sorted(latencies)[2] * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms")
    finally:
        consumer.close()
        producer.close()
        await broker.stop()


async def test_min_bytes_waits_for_enough_and_max_wait_answers_with_what_is_there() -> None:
    broker = await started_broker(ONE)
    consumer, producer = await _clients(broker)
    try:
        one, two = batch(1, value=b"a" * 600), batch(1, value=b"b" * 600)
        waiting = asyncio.ensure_future(consumer.request(
            fetch([("events", 0, 0), ("events", 1, 0)], max_wait_ms=20_000, min_bytes=1000), 30
        ))  # fmt: skip
        await asyncio.sleep(0.2)
        assert only(await producer.request(produce("events", 0, one), 10)).error_code == 0
        await asyncio.sleep(0.3)
        assert not waiting.done()  # ~670 bytes < 1000
        assert only(await producer.request(produce("events", 1, two), 10)).error_code == 0
        first, second = (await asyncio.wait_for(waiting, 5)).responses[0].partitions
        assert (bytes(first.records), bytes(second.records)) == (as_stored(one, 0, 3), as_stored(two, 0, 3))
        # nothing more comes: the timer answers, empty, after max_wait
        t0 = time.monotonic()
        empty = only(await consumer.request(fetch([("events", 0, 1)], max_wait_ms=400, min_bytes=1), 10))
        waited = time.monotonic() - t0
        assert (empty.error_code, bytes(empty.records), empty.high_watermark) == (0, b"", 1)
        assert 0.35 <= waited < 5, waited
    finally:
        consumer.close()
        producer.close()
        await broker.stop()


async def test_a_leader_change_answers_a_waiting_fetch() -> None:
    broker = await started_broker(ONE)
    consumer, _ = await _clients(broker)
    control = await KafkaConnection.open("127.0.0.1", broker.port(CONTROL))
    try:
        waiting = asyncio.ensure_future(consumer.request(fetch([("events", 0, 0)], max_wait_ms=20_000, version=16), 30))
        await asyncio.sleep(0.2)
        assert not waiting.done()
        moved = {"events": [(0, 2, (1, 2), (1, 2), 4)]}  # broker 2 leads now, epoch 4
        assert (await control.request(leader_and_isr(moved), 10)).error_code == 0
        answer = await asyncio.wait_for(waiting, 5)
        assert only(answer).error_code == E.NOT_LEADER_OR_FOLLOWER
        assert only(answer).current_leader.leader_id == 2
    finally:
        consumer.close()
        control.close()
        await broker.stop()


async def test_stopping_the_broker_answers_waiting_fetches_at_once() -> None:
    broker = await started_broker(ONE)
    consumer, _ = await _clients(broker)
    try:
        waiting = asyncio.ensure_future(consumer.request(fetch([("events", 0, 0)], max_wait_ms=60_000), 90))
        await asyncio.sleep(0.2)
        t0 = time.monotonic()
        await broker.stop()
        assert time.monotonic() - t0 < 3
        part = only(await asyncio.wait_for(waiting, 5))
        assert (part.error_code, bytes(part.records)) == (0, b"")
    finally:
        consumer.close()
