"""Offsets committed in a transaction (confluent-kafka's ``send_offsets_to_transaction``:
AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator): invisible until the
transaction commits (a require_stable fetch, librdkafka's, waits for it), dropped when it
aborts."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kmeta.testing import Cluster

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster(kmeta_cluster_factory: Callable[..., Cluster]) -> Iterator[Cluster]:
    with kmeta_cluster_factory(3) as c:
        c.create_topic("in", partitions=1, rf=3)
        c.create_topic("out", partitions=1, rf=3)
        yield c


def test_offsets_follow_their_transaction(cluster: Cluster) -> None:
    config = cluster.client_config()
    consumer = Consumer({**config, "group.id": "txg", "enable.auto.commit": False})
    producer = Producer({**config, "transactional.id": "tx-offsets"})
    try:
        consumer.assign([TopicPartition("in", 0)])

        def committed() -> int:
            return int(consumer.committed([TopicPartition("in", 0)], timeout=30)[0].offset)

        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("out", b"x")
        producer.send_offsets_to_transaction([TopicPartition("in", 0, 7)], consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        assert committed() == 7
        producer.begin_transaction()
        producer.produce("out", b"y")
        producer.send_offsets_to_transaction([TopicPartition("in", 0, 99)], consumer.consumer_group_metadata(), 30)
        producer.abort_transaction(30)
        assert committed() == 7
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition("in", 0, 20)], consumer.consumer_group_metadata(), 30)
        committer = threading.Timer(2.0, lambda: producer.commit_transaction(30))
        started = time.monotonic()
        committer.start()
        try:
            assert committed() == 20  # (UNSTABLE_OFFSET_COMMIT until the marker: librdkafka retries)
            assert time.monotonic() - started >= 1.5
        finally:
            committer.join()
    finally:
        consumer.close()
