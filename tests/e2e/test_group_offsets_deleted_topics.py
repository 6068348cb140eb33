"""A deleted topic's committed offsets go (Kafka's ``onPartitionsDeleted``), with real clients
on a three-broker cluster: a group commits offsets on a topic, the topic is deleted, and then
OffsetFetch (confluent-kafka's and kafka-python's admin clients) no longer returns its
partitions, the tombstones are in ``__consumer_offsets``, the offsets stay gone when the
group's coordinator is killed and another broker loads the partition, and the topic re-created
under the same name starts with no committed offset (an earliest-resetting consumer of the
group reads it from the start).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

with warnings.catch_warnings():  # kafka-python uses importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient

from kmeta.server.group.offsets.offset_records import decode_key, record_key_version
from kmeta.testing import Cluster
from tests.e2e.test_group_offsets import _coordinator

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")]

DOOMED, KEPT, GROUP = "doomed", "kept", "deleted-topic-group"


def _listed(cluster: Cluster) -> set[tuple[str, int, int]]:
    admin = AdminClient(cluster.client_config())
    deadline = time.monotonic() + 60
    while True:  # (the coordinator may be moving after a kill: retried as the admin client would)
        try:
            got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])[GROUP].result(30)
            return {(tp.topic, tp.partition, tp.offset) for tp in got.topic_partitions}
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _kp_listed(cluster: Cluster) -> set[tuple[str, int, int]]:
    kp = KafkaAdminClient(**cluster.client_config(kafka_python=True))
    try:
        return {(tp.topic, tp.partition, o.offset) for tp, o in kp.list_group_offsets(GROUP)[GROUP].items()}
    finally:
        kp.close()


def _offset_records(cluster: Cluster) -> list[tuple[str, int, bool]]:
    """(topic, partition, tombstone) of every offset commit record of GROUP in
    ``__consumer_offsets``, in log order (read with a plain consumer, as kafka-console-consumer
    reads it with its formatter)."""
    consumer = Consumer({**cluster.client_config(), "group.id": "reader", "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics("__consumer_offsets", timeout=30).topics["__consumer_offsets"].partitions
        found = []
        for index in partitions:
            tp = TopicPartition("__consumer_offsets", index)
            _, high = consumer.get_watermark_offsets(tp, timeout=30)
            if high == 0:
                continue
            consumer.assign([TopicPartition("__consumer_offsets", index, 0)])
            position = 0
            while position < high:
                message = consumer.poll(10)
                assert message is not None, f"__consumer_offsets-{index} stopped at {position} of {high}"
                if message.error():
                    continue
                position = message.offset() + 1
                key = message.key()
                if key is None or record_key_version(key) not in (0, 1):
                    continue
                decoded = decode_key(key)
                if decoded.group == GROUP:
                    found.append((decoded.topic, decoded.partition, message.value() is None))
        return found
    finally:
        consumer.close()


def _wait(what: str, fn: Callable[[], bool], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not fn():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def _recreate(cluster: Cluster) -> None:
    deadline = time.monotonic() + 60
    while True:  # (TOPIC_ALREADY_EXISTS while the deletion finishes on every broker)
        try:
            cluster.create_topic(DOOMED, partitions=2, rf=3)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_a_deleted_topics_offsets_go_and_a_new_topic_of_that_name_starts_afresh(
    kmeta_cluster_factory: Callable[..., Cluster],
) -> None:
    with kmeta_cluster_factory(3) as cluster:
        cluster.create_topic(DOOMED, partitions=2, rf=3)
        cluster.create_topic(KEPT, partitions=1, rf=3)
        committer = Consumer({**cluster.client_config(), "group.id": GROUP, "enable.auto.commit": False})
        try:
            committer.assign([TopicPartition(DOOMED, 0), TopicPartition(DOOMED, 1), TopicPartition(KEPT, 0)])
            committer.commit(
                offsets=[TopicPartition(DOOMED, 0, 5), TopicPartition(DOOMED, 1, 6), TopicPartition(KEPT, 0, 3)],
                asynchronous=False,
            )
        finally:
            committer.close()
        assert _listed(cluster) == {(DOOMED, 0, 5), (DOOMED, 1, 6), (KEPT, 0, 3)}

        cluster.delete_topic(DOOMED)
        _wait("the deleted topic's offsets are still listed", lambda: _listed(cluster) == {(KEPT, 0, 3)})
        assert _kp_listed(cluster) == {(KEPT, 0, 3)}
        records = _offset_records(cluster)
        for partition in (0, 1):  # (each commit, then its tombstone after it)
            mine = [tombstone for topic, p, tombstone in records if (topic, p) == (DOOMED, partition)]
            assert mine == [False, True], records
        assert [r for r in records if r[0] == KEPT] == [(KEPT, 0, False)]

        victim = _coordinator(cluster, GROUP)
        cluster.kill_broker(victim)
        try:
            _wait("the coordinator did not move", lambda: _coordinator(cluster, GROUP) != victim, 60)
            assert _listed(cluster) == {(KEPT, 0, 3)}  # (the new leader loaded the tombstones)
        finally:
            cluster.start_broker(victim)

        _recreate(cluster)
        producer = Producer(cluster.client_config())
        for i in range(10):
            producer.produce(DOOMED, value=b"v%d" % i, partition=0)
        assert producer.flush(30) == 0
        consumer = Consumer({
            **cluster.client_config(), "group.id": GROUP, "auto.offset.reset": "earliest", "enable.auto.commit": False,
        })  # fmt: skip
        try:
            assert consumer.committed([TopicPartition(DOOMED, 0)], timeout=30)[0].offset == -1001
            consumer.subscribe([DOOMED])
            first = None
            deadline = time.monotonic() + 60
            while first is None:
                assert time.monotonic() < deadline, "nothing consumed from the re-created topic"
                message = consumer.poll(1)
                if message is not None and not message.error() and message.partition() == 0:
                    first = message.offset()
            assert first == 0  # (not the old topic's committed 5)
        finally:
            consumer.close()
