"""A producer and a consumer stay connected while their partition's leader moves (the fixture's
``move_leader``: a reassignment putting broker 3 first, then a preferred ElectLeaders), and
both follow it to the new leader.

The old leader answers Produce and Fetch NOT_LEADER_OR_FOLLOWER with the new leader's id, epoch
and endpoint (KIP-951): librdkafka moves to the new leader on that answer, before any Metadata
answer (its own debug log shows the order); kafka-python and aiokafka know no KIP-951 and
refresh their metadata first. Nothing is replicated yet, so the new leader's log starts empty: the
consumer's position is past its end, and it restarts at its earliest offset
(``auto.offset.reset``). Every record produced before the move is read from the old leader,
every one after from the new one, each in order.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import warnings
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

with warnings.catch_warnings():  # kafka-python uses importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as ATopicPartition

from kmeta.testing import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")]

#: records before the move (read from broker 1) and after it (from broker 3, which replicated
#: broker 1's log: the offsets go on)
BEFORE, AFTER = 6_000, 4_000


@pytest.fixture(scope="module")
def cluster(kmeta_cluster_factory: Callable[..., Cluster]) -> Iterator[Cluster]:
    with kmeta_cluster_factory(3) as c:
        yield c


class ClientLog(logging.Handler):
    """librdkafka's own log (``debug: protocol,metadata,topic``): a "Sent <Api>Request" line per
    request, bootstrap connections included (its statistics lose those once a bootstrap broker
    is known by id), "Received MetadataResponse" per answer, and each partition's leader
    change, "leader 1 epoch 0 -> leader 3 epoch 2"."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.logger = logging.getLogger(f"tests.rdkafka.{name}")
        self.logger.addHandler(self)
        self.logger.setLevel(logging.DEBUG)
        self.logger.propagate = False

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def count(self, api: str, since: int = 0) -> int:
        return sum(f"Sent {api}Request " in line for line in self.lines[since:])

    def moved_before_metadata(self, since: int, old: int, new: int) -> bool:
        """After line ``since``, the client moved the partition from ``old`` to ``new`` before
        any Metadata answer came (none may come at all)."""
        lines = self.lines[since:]
        change = re.compile(rf"leader {old} epoch \d+ -> leader {new} epoch")
        moved = next((i for i, line in enumerate(lines) if change.search(line)), None)
        answered = next((i for i, line in enumerate(lines) if "Received MetadataResponse" in line), len(lines))
        assert moved is not None, f"never moved from {old} to {new}:\n" + "\n".join(lines[-50:])
        return moved < answered


def _rd_consume(consumer: Consumer, n: int) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while len(got) < n:
        assert time.monotonic() < deadline, f"{len(got)} of {n} records after 30 s"
        for m in consumer.consume(num_messages=min(1000, n - len(got)), timeout=1):
            assert m.error() is None, m.error()
            got.append((m.offset(), m.value()))
    return got


def test_librdkafka_follows_a_leader_move_before_any_metadata_answer(cluster: Cluster) -> None:
    """Both clients stay connected through the move; the consumer is paused while the fixture
    moves the leader, so that its next Fetch meets brokers that all know the new leader (one
    racing the move can meet the new leader before its LeaderAndIsr, be answered
    NOT_LEADER_OR_FOLLOWER without a leader, and refresh, as against Kafka)."""
    topic = "follow-rdkafka"
    cluster.create_topic(topic, assignment=[[1, 2, 3]])
    p_log, c_log = ClientLog("producer"), ClientLog("consumer")
    common = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "topic.metadata.refresh.interval.ms": 300_000,  # no periodic refresh in the window
        "debug": "protocol,metadata,topic",
    }
    producer = Producer({**common, "acks": "all", "linger.ms": 5, "logger": p_log.logger})
    consumer = Consumer({
        **common, "group.id": "unused", "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 50, "logger": c_log.logger,
    })  # fmt: skip
    tp = TopicPartition(topic, 0, 0)
    try:
        consumer.assign([tp])
        for i in range(BEFORE):
            producer.produce(topic, b"%d" % i, partition=0)
            producer.poll(0)
        assert producer.flush(30) == 0
        assert _rd_consume(consumer, BEFORE) == [(i, b"%d" % i) for i in range(BEFORE)]
        consumer.pause([tp])
        consumer.consume(num_messages=1, timeout=0.2)  # (serves the logs queued so far)
        marks = len(p_log.lines), len(c_log.lines)

        cluster.move_leader(topic, 0, 3)
        consumer.resume([tp])
        for i in range(BEFORE, BEFORE + AFTER):
            producer.produce(topic, b"%d" % i, partition=0)
            producer.poll(0)
        assert producer.flush(30) == 0
        # broker 3 replicated broker 1's log (issue 29): the offsets go on where they were
        assert _rd_consume(consumer, AFTER) == [(BEFORE + i, b"%d" % (BEFORE + i)) for i in range(AFTER)]
        producer.poll(0.2)
        assert p_log.count("Produce", marks[0]) > 0
        assert c_log.count("Fetch", marks[1]) > 0
        # KIP-951: both moved to broker 3 on the old leader's answer, before any Metadata
        # answer (the producer's error handling may still start a "fast leader query"
        # afterwards, which finds the leader it already uses)
        assert p_log.moved_before_metadata(marks[0], 1, 3)
        assert c_log.moved_before_metadata(marks[1], 1, 3)
        assert p_log.count("Metadata") > 0  # (the log does show Metadata requests: at the start)
    finally:
        consumer.close()


def test_kafka_python_follows_a_leader_move_through_metadata(cluster: Cluster) -> None:
    topic = "follow-kafka-python"
    cluster.create_topic(topic, assignment=[[1, 2, 3]])
    # no InitProducerId yet, so no idempotence: one request in flight keeps the order when the
    # old leader's NOT_LEADER_OR_FOLLOWER sends batches again (Kafka's advice without it)
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=5, enable_idempotence=False,
        max_in_flight_requests_per_connection=1,
    )  # fmt: skip
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers, group_id=None, enable_auto_commit=False,
        auto_offset_reset="earliest", fetch_max_wait_ms=50,
    )  # fmt: skip
    tp = KTopicPartition(topic, 0)

    def consume(n: int) -> list[tuple[int, bytes]]:
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while len(got) < n:
            assert time.monotonic() < deadline, f"{len(got)} of {n} records after 30 s"
            got += [(r.offset, r.value) for r in consumer.poll(timeout_ms=1000).get(tp, [])]
        return got

    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        sent = [producer.send(topic, b"%d" % i, partition=0) for i in range(BEFORE)]
        producer.flush(30)
        assert [f.get(0).offset for f in sent] == list(range(BEFORE))
        assert consume(BEFORE) == [(i, b"%d" % i) for i in range(BEFORE)]

        cluster.move_leader(topic, 0, 3)
        sent = [producer.send(topic, b"%d" % i, partition=0) for i in range(BEFORE, BEFORE + AFTER)]
        producer.flush(30)
        # broker 3 replicated broker 1's log (issue 29): the offsets go on where they were
        assert [f.get(0).offset for f in sent] == list(range(BEFORE, BEFORE + AFTER))
        assert consume(AFTER) == [(BEFORE + i, b"%d" % (BEFORE + i)) for i in range(AFTER)]
    finally:
        consumer.close()
        producer.close(5)


async def test_aiokafka_follows_a_leader_move_through_metadata(cluster: Cluster) -> None:
    topic = "follow-aiokafka"
    cluster.create_topic(topic, assignment=[[1, 2, 3]])
    # (aiokafka sends a partition's next batch once the last one is answered: in order across
    # the retries, idempotence or not)
    producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=5)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers, group_id=None, enable_auto_commit=False,
        auto_offset_reset="earliest", fetch_max_wait_ms=50,
    )  # fmt: skip
    tp = ATopicPartition(topic, 0)

    async def consume(n: int) -> list[tuple[int, bytes]]:
        got: list[tuple[int, bytes]] = []
        async with asyncio.timeout(30):
            while len(got) < n:
                polled = await consumer.getmany(tp, timeout_ms=1000)
                got += [(r.offset, r.value) for r in polled.get(tp, [])]
        return got

    async def produce(first: int, count: int) -> list[int]:
        sent = [await producer.send(topic, b"%d" % i, partition=0) for i in range(first, first + count)]
        return [m.offset for m in await asyncio.wait_for(asyncio.gather(*sent), 30)]

    await producer.start()
    await consumer.start()
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        assert await produce(0, BEFORE) == list(range(BEFORE))
        assert await consume(BEFORE) == [(i, b"%d" % i) for i in range(BEFORE)]
        await asyncio.to_thread(cluster.move_leader, topic, 0, 3)
        # broker 3 replicated broker 1's log (issue 29): the offsets go on where they were
        assert await produce(BEFORE, AFTER) == list(range(BEFORE, BEFORE + AFTER))
        assert await consume(AFTER) == [(BEFORE + i, b"%d" % (BEFORE + i)) for i in range(AFTER)]
    finally:
        await consumer.stop()
        await producer.stop()
