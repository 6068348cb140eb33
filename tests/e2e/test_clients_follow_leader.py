"""A producer and a consumer stay connected while their partition's leader moves (the fixture's
``move_leader``: a reassignment putting broker 3 first, then a preferred ElectLeaders), and
both follow it to the new leader.

The old leader answers Produce and Fetch NOT_LEADER_OR_FOLLOWER with the new leader's id, epoch
and endpoint (KIP-951): librdkafka takes them as they come, without asking Metadata (its own
statistics count the requests it sent, per broker and API); kafka-python knows no KIP-951 and
refreshes its metadata. Nothing is replicated yet, so the new leader's log starts empty: the
consumer's position is past its end, and it restarts at its earliest offset
(``auto.offset.reset``). Every record produced before the move is read from the old leader,
every one after from the new one, each in order.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

with warnings.catch_warnings():  # kafka-python uses importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

from kmeta.testing import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")]

#: records before the move (read from broker 1) and after it (from broker 3): fewer after, so
#: the consumer's position is past the new leader's log end and it resets
BEFORE, AFTER = 6_000, 4_000


@pytest.fixture(scope="module")
def cluster(kmeta_cluster_factory: Callable[..., Cluster]) -> Iterator[Cluster]:
    with kmeta_cluster_factory(3) as c:
        yield c


class Stats:
    """librdkafka's statistics (``stats_cb``): the requests this client sent, per API."""

    def __init__(self) -> None:
        self.last: dict[str, Any] = {}

    def __call__(self, text: str) -> None:
        self.last = json.loads(text)

    def sent(self, api: str) -> int:
        return sum(b.get("req", {}).get(api, 0) for b in self.last.get("brokers", {}).values())

    def leader(self, topic: str) -> int:
        return int(self.last["topics"][topic]["partitions"]["0"]["leader"])


def _rd_consume(consumer: Consumer, n: int) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while len(got) < n:
        assert time.monotonic() < deadline, f"{len(got)} of {n} records after 30 s"
        for m in consumer.consume(num_messages=min(1000, n - len(got)), timeout=1):
            assert m.error() is None, m.error()
            got.append((m.offset(), m.value()))
    return got


def _settle(*clients: Producer | Consumer) -> None:
    """Two statistics ticks, so each client's last statistics are after everything so far."""
    for _ in range(2):
        time.sleep(0.25)
        for c in clients:
            c.poll(0) if isinstance(c, Producer) else c.consume(num_messages=1, timeout=0)


def test_librdkafka_follows_a_leader_move_without_asking_metadata(cluster: Cluster) -> None:
    topic = "follow-rdkafka"
    cluster.create_topic(topic, assignment=[[1, 2, 3]])
    common = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "topic.metadata.refresh.interval.ms": 300_000,  # no periodic refresh in the window
        "statistics.interval.ms": 100,
    }
    p_stats, c_stats = Stats(), Stats()
    producer = Producer({**common, "acks": "all", "linger.ms": 5, "stats_cb": p_stats})
    consumer = Consumer({
        **common, "group.id": "unused", "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 50, "stats_cb": c_stats,
    })  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        for i in range(BEFORE):
            producer.produce(topic, b"%d" % i, partition=0)
            producer.poll(0)
        assert producer.flush(30) == 0
        assert _rd_consume(consumer, BEFORE) == [(i, b"%d" % i) for i in range(BEFORE)]
        _settle(producer, consumer)
        asked = p_stats.sent("Metadata"), c_stats.sent("Metadata")
        assert (p_stats.leader(topic), c_stats.leader(topic)) == (1, 1)

        cluster.move_leader(topic, 0, 3)
        for i in range(BEFORE, BEFORE + AFTER):
            producer.produce(topic, b"%d" % i, partition=0)
            producer.poll(0)
        assert producer.flush(30) == 0
        # broker 3 replicated broker 1's log (issue 29): the offsets go on where they were
        assert _rd_consume(consumer, AFTER) == [(BEFORE + i, b"%d" % (BEFORE + i)) for i in range(AFTER)]
        _settle(producer, consumer)
        assert (p_stats.leader(topic), c_stats.leader(topic)) == (3, 3)
        # KIP-951: the new leader came in the old leader's answers; no Metadata round trip
        assert (p_stats.sent("Metadata"), c_stats.sent("Metadata")) == asked
        assert p_stats.sent("Produce") > 0
        assert c_stats.sent("Fetch") > 0
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
