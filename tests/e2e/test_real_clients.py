"""Real Python Kafka clients against a kmeta.testing cluster: produce 10,000 records, list the
offsets (earliest, latest, by time), consume every record from each, partitions assigned (no
consumer group: kmeta serves no group APIs yet). The plan and the checks: tests/e2e/real_clients.py.
"""

from __future__ import annotations

import asyncio
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
from tests.e2e.real_clients import Consumed, Plan, Timer, check_consumed, check_listed, plan

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")]


@pytest.fixture(scope="module")
def cluster(kmeta_cluster_factory: Callable[..., Cluster]) -> Iterator[Cluster]:
    with kmeta_cluster_factory(3) as c:
        yield c


# -- confluent-kafka (librdkafka) ---------------------------------------------------------------
def _rdkafka_consume(c: Consumer, p: Plan, start: dict[int, int]) -> dict[int, list[Consumed]]:
    c.assign([TopicPartition(p.topic, q, o) for q, o in start.items()])
    want = sum(len(p.values(q, o)) for q, o in start.items())
    got: dict[int, list[Consumed]] = {q: [] for q in start}
    n = 0
    while n < want:
        # (consume waits for num_messages or the timeout: never ask for more than are left)
        batch = c.consume(num_messages=min(2000, want - n), timeout=10)
        assert batch, f"no record for 10 s with {want - n} to come"
        for m in batch:
            assert m.error() is None, m.error()
            got[m.partition()].append((m.offset(), m.value().decode(), m.timestamp()[1]))
            n += 1
    assert not c.consume(num_messages=10, timeout=0.2)  # nothing beyond them
    return got


def test_confluent_kafka_round_trip(cluster: Cluster) -> None:
    p = plan(cluster, "rt-confluent")
    timer = Timer("confluent-kafka")
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5, "acks": "all"})
    for partition, value, ts in p.records():
        producer.produce(p.topic, value.encode(), partition=partition, timestamp=ts)
        producer.poll(0)
    assert producer.flush(30) == 0
    timer.lap("produce")
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": "unused",
        "enable.auto.commit": False, "enable.auto.offset.store": False,
    })  # fmt: skip
    try:
        tps = [TopicPartition(p.topic, q) for q in range(p.partitions)]
        marks = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10) for tp in tps}
        timed = consumer.offsets_for_times([TopicPartition(p.topic, q, p.by_time) for q in range(p.partitions)], timeout=10)
        at_time = {tp.partition: tp.offset for tp in timed}
        check_listed(p, {q: lo for q, (lo, _) in marks.items()}, {q: hi for q, (_, hi) in marks.items()}, at_time)
        timer.lap("list offsets")
        check_consumed(p, p.earliest, _rdkafka_consume(consumer, p, p.earliest))
        timer.lap("consume from earliest")
        check_consumed(p, at_time, _rdkafka_consume(consumer, p, at_time))
        timer.lap("consume from by-time")
        # from latest: nothing, until one more record arrives in partition 1
        consumer.assign([TopicPartition(p.topic, q, p.latest[q]) for q in range(p.partitions)])
        assert not consumer.consume(num_messages=10, timeout=0.5)
        producer.produce(p.topic, b"late", partition=1)
        assert producer.flush(10) == 0
        (m,) = consumer.consume(num_messages=1, timeout=10)
        assert not consumer.consume(num_messages=1, timeout=0.2)
        assert (m.partition(), m.offset(), m.value()) == (1, p.latest[1], b"late")
    finally:
        consumer.close()
    timer.report()


# -- kafka-python -------------------------------------------------------------------------------
def _kafka_python_consume(c: KafkaConsumer, p: Plan, start: dict[int, int]) -> dict[int, list[Consumed]]:
    tps = {q: KTopicPartition(p.topic, q) for q in start}
    c.assign(list(tps.values()))
    for q, offset in start.items():
        c.seek(tps[q], offset)
    want = sum(len(p.values(q, o)) for q, o in start.items())
    got: dict[int, list[Consumed]] = {q: [] for q in start}
    n = 0
    while n < want:
        polled = c.poll(timeout_ms=10_000, max_records=5000)
        assert polled, f"no record for 10 s with {want - n} to come"
        for tp, records in polled.items():
            for r in records:
                got[tp.partition].append((r.offset, r.value.decode(), r.timestamp))
                n += 1
    assert not c.poll(timeout_ms=200)
    return got


def test_kafka_python_round_trip(cluster: Cluster) -> None:
    p = plan(cluster, "rt-kafka-python")
    timer = Timer("kafka-python")
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, linger_ms=5, acks="all", enable_idempotence=False
    )  # (no InitProducerId yet)
    futures = [producer.send(p.topic, value.encode(), partition=q, timestamp_ms=ts) for q, value, ts in p.records()]
    producer.flush(30)
    assert all(f.succeeded() for f in futures)
    timer.lap("produce")
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=None, enable_auto_commit=False)
    try:
        tps = [KTopicPartition(p.topic, q) for q in range(p.partitions)]
        earliest = {tp.partition: o for tp, o in consumer.beginning_offsets(tps).items()}
        latest = {tp.partition: o for tp, o in consumer.end_offsets(tps).items()}
        timed = consumer.offsets_for_times(dict.fromkeys(tps, p.by_time))
        at_time = {tp.partition: ot.offset for tp, ot in timed.items()}
        check_listed(p, earliest, latest, at_time)
        timer.lap("list offsets")
        check_consumed(p, earliest, _kafka_python_consume(consumer, p, earliest))
        timer.lap("consume from earliest")
        check_consumed(p, at_time, _kafka_python_consume(consumer, p, at_time))
        timer.lap("consume from by-time")
        consumer.seek_to_end()
        assert not consumer.poll(timeout_ms=500)
        producer.send(p.topic, b"late", partition=2).get(10)
        polled = consumer.poll(timeout_ms=10_000)
        assert [(tp.partition, r.offset, r.value) for tp, rs in polled.items() for r in rs] == [(2, p.latest[2], b"late")]
    finally:
        consumer.close()
        producer.close(5)
    timer.report()


# -- aiokafka -----------------------------------------------------------------------------------
async def _aiokafka_consume(c: AIOKafkaConsumer, p: Plan, start: dict[int, int]) -> dict[int, list[Consumed]]:
    tps = {q: ATopicPartition(p.topic, q) for q in start}
    c.assign(list(tps.values()))
    for q, offset in start.items():
        c.seek(tps[q], offset)
    want = sum(len(p.values(q, o)) for q, o in start.items())
    got: dict[int, list[Consumed]] = {q: [] for q in start}
    n = 0
    while n < want:
        polled = await c.getmany(timeout_ms=10_000, max_records=5000)
        assert polled, f"no record for 10 s with {want - n} to come"
        for tp, records in polled.items():
            for r in records:
                got[tp.partition].append((r.offset, r.value.decode(), r.timestamp))
                n += 1
    assert not await c.getmany(timeout_ms=200)
    return got


async def test_aiokafka_round_trip(cluster: Cluster) -> None:
    p = plan(cluster, "rt-aiokafka")
    timer = Timer("aiokafka")
    producer = AIOKafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, linger_ms=5, acks="all", enable_idempotence=False
    )  # (no InitProducerId yet)
    await producer.start()
    consumer = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=None, enable_auto_commit=False)
    try:
        sent = [await producer.send(p.topic, value.encode(), partition=q, timestamp_ms=ts) for q, value, ts in p.records()]
        await asyncio.wait_for(asyncio.gather(*sent), 30)
        timer.lap("produce")
        await consumer.start()
        tps = [ATopicPartition(p.topic, q) for q in range(p.partitions)]
        earliest = {tp.partition: o for tp, o in (await consumer.beginning_offsets(tps)).items()}
        latest = {tp.partition: o for tp, o in (await consumer.end_offsets(tps)).items()}
        timed = await consumer.offsets_for_times(dict.fromkeys(tps, p.by_time))
        at_time = {tp.partition: ot.offset for tp, ot in timed.items()}
        check_listed(p, earliest, latest, at_time)
        timer.lap("list offsets")
        check_consumed(p, earliest, await _aiokafka_consume(consumer, p, earliest))
        timer.lap("consume from earliest")
        check_consumed(p, at_time, await _aiokafka_consume(consumer, p, at_time))
        timer.lap("consume from by-time")
        await consumer.seek_to_end()
        assert not await consumer.getmany(timeout_ms=500)
        await (await producer.send(p.topic, b"late", partition=0))
        polled = await consumer.getmany(timeout_ms=10_000)
        assert [(tp.partition, r.offset, r.value) for tp, rs in polled.items() for r in rs] == [(0, p.latest[0], b"late")]
    finally:
        await consumer.stop()
        await producer.stop()
    timer.report()


# -- auto.create.topics.enable ------------------------------------------------------------------
def test_a_producers_first_record_creates_its_topic(cluster: Cluster) -> None:
    """As with Kafka's defaults: librdkafka's and kafka-python's producers ask Metadata for a
    topic nobody created, the broker creates it (num.partitions 1, replication factor 1) and
    answers LEADER_NOT_AVAILABLE until it is served; the producers retry and deliver."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    reports: list[tuple[object, int, int]] = []
    for i in range(3):
        producer.produce("born-rdkafka", b"%d" % i, on_delivery=lambda e, m: reports.append((e, m.partition(), m.offset())))
    assert producer.flush(30) == 0
    assert reports == [(None, 0, 0), (None, 0, 1), (None, 0, 2)]
    kp = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=False)
    try:
        assert kp.send("born-kafka-python", b"x").get(30).offset == 0
    finally:
        kp.close(5)
    for name in ("born-rdkafka", "born-kafka-python"):
        served = cluster.metadata(cluster.live_brokers[0]).topics[name]
        assert len(served) == 1
        assert len(served[0].replicas) == 1
