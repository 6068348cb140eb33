"""The data plane under a real controller (kmeta.testing.Cluster): the partitions a broker
serves come from the controller's LeaderAndIsr, a topic's configs (max.message.bytes) from
its UpdateMetadata, and the same name deleted (StopReplica(delete)) and created again starts
empty."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kmeta.protocol.errors import ErrorCode
from kmeta.testing import Cluster
from kmeta.testing.requests import KafkaRequestError

pytestmark = pytest.mark.e2e


def _produce(cluster: Cluster, topic: str, values: list[bytes]) -> list[tuple[int, int]]:
    """Each value to partition i % 2; their (partition, offset) as delivered."""
    producer = Producer({**cluster.client_config(), "acks": "all", "linger.ms": 2})
    delivered: list[tuple[int, int]] = []

    def report(err: object, message: object) -> None:
        assert err is None, err
        delivered.append((message.partition(), message.offset()))  # type: ignore[attr-defined]

    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % 2, on_delivery=report)
    assert producer.flush(30) == 0
    return sorted(delivered)


def _consume(cluster: Cluster, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({**cluster.client_config(), "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(100, 0.5) if m.error() is None]
        got += [m.value() for m in consumer.consume(100, 1.0) if m.error() is None]  # (no more)
    finally:
        consumer.close()
    return sorted(got)


def _create(cluster: Cluster, topic: str) -> int:
    try:
        cluster.create_topic(topic, 2, 1)
    except KafkaRequestError as exc:
        return exc.code
    return ErrorCode.NONE


def test_a_deleted_topic_created_again_starts_empty() -> None:
    with Cluster(1) as cluster:
        cluster.create_topic("recycled", 2, 1, configs={"max.message.bytes": "2000"})
        old = [b"old-%d" % i for i in range(20)]
        assert _produce(cluster, "recycled", old) == [(p, o) for p in range(2) for o in range(10)]
        assert _consume(cluster, "recycled", 20) == sorted(old)
        refused = Producer({**cluster.client_config(), "acks": "1"})
        errors: list[object] = []
        refused.produce("recycled", b"x" * 3000, partition=0, on_delivery=lambda err, _m: errors.append(err))
        refused.flush(30)
        assert [e.code() for e in errors] == [10]  # type: ignore[attr-defined]  # MESSAGE_TOO_LARGE (the topic's config)
        cluster.delete_topic("recycled")
        deadline = time.monotonic() + 30
        while (code := _create(cluster, "recycled")) == ErrorCode.TOPIC_ALREADY_EXISTS:
            assert time.monotonic() < deadline  # (until the deletion completed)
            time.sleep(0.1)
        assert code == ErrorCode.NONE
        new = [b"new-%d" % i for i in range(4)]
        assert _produce(cluster, "recycled", new) == [(0, 0), (0, 1), (1, 0), (1, 1)]
        assert _consume(cluster, "recycled", 4) == sorted(new)
