"""Committed offsets with real clients: OffsetCommit and OffsetFetch from confluent-kafka,
kafka-python and aiokafka (standalone consumers: assigned partitions, generation -1), the
offsets surviving their coordinator's broker killed -9 (``__consumer_offsets`` is replicated
and the new leader of the group's partition loads it), the admin clients' group offset APIs
(list / alter / delete), and offsets.retention.minutes removing a standalone consumer's
offsets once they are older than the retention.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

with warnings.catch_warnings():  # kafka-python uses importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata as KOffsetAndMetadata

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import OffsetAndMetadata as AOffsetAndMetadata
from aiokafka.structs import TopicPartition as ATopicPartition

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import find_coordinator as fc
from kmeta.testing import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")]

TOPIC = "orders"


@pytest.fixture(scope="module")
def cluster(kmeta_cluster_factory: Callable[..., Cluster]) -> Iterator[Cluster]:
    with kmeta_cluster_factory(3) as c:
        c.create_topic(TOPIC, partitions=3, rf=3)
        yield c


def _rd_consumer(cluster: Cluster, group: str) -> Consumer:
    return Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})


def _rd_committed(cluster: Cluster, group: str, partitions: list[int]) -> dict[int, int]:
    """librdkafka's view (its Python binding reads a committed offset's metadata past its end:
    the metadata is checked with kafka-python's, :func:`_kp_committed`)."""
    consumer = _rd_consumer(cluster, group)
    try:
        got = consumer.committed([TopicPartition(TOPIC, p) for p in partitions], timeout=30)
        return {tp.partition: tp.offset for tp in got}
    finally:
        consumer.close()


def _kp_committed(cluster: Cluster, group: str, partitions: list[int]) -> dict[int, tuple[int, str] | None]:
    consumer = KafkaConsumer(**cluster.client_config(kafka_python=True), group_id=group, enable_auto_commit=False)
    try:
        got = {p: consumer.committed(KTopicPartition(TOPIC, p), metadata=True) for p in partitions}
        return {p: None if o is None else (o.offset, o.metadata) for p, o in got.items()}
    finally:
        consumer.close()


def test_confluent_kafka_commits_and_fetches(cluster: Cluster) -> None:
    consumer = _rd_consumer(cluster, "rd-standalone")
    try:
        consumer.assign([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)])
        consumer.commit(
            offsets=[TopicPartition(TOPIC, 0, 42, metadata="m0"), TopicPartition(TOPIC, 1, 7)], asynchronous=False
        )
    finally:
        consumer.close()
    assert _rd_committed(cluster, "rd-standalone", [0, 1, 2]) == {0: 42, 1: 7, 2: -1001}
    # (confluent-kafka's binding sends a metadata string with its C terminator: kept as sent)
    assert _kp_committed(cluster, "rd-standalone", [0, 1, 2]) == {0: (42, "m0\x00"), 1: (7, ""), 2: None}


def test_kafka_python_commits_and_fetches(cluster: Cluster) -> None:
    config = cluster.client_config(kafka_python=True)
    consumer = KafkaConsumer(**config, group_id="kp-standalone", enable_auto_commit=False)
    try:
        tp = KTopicPartition(TOPIC, 2)
        consumer.assign([tp])
        consumer.commit({tp: KOffsetAndMetadata(99, "kp", -1)})
        assert consumer.committed(tp) == 99
    finally:
        consumer.close()
    assert _rd_committed(cluster, "kp-standalone", [2]) == {2: 99}
    assert _kp_committed(cluster, "kp-standalone", [2]) == {2: (99, "kp")}


def test_aiokafka_commits_and_fetches(cluster: Cluster) -> None:
    async def run() -> int | None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=cluster.bootstrap_servers, group_id="aio-standalone", enable_auto_commit=False
        )
        await consumer.start()
        try:
            tp = ATopicPartition(TOPIC, 1)
            consumer.assign([tp])
            await consumer.commit({tp: AOffsetAndMetadata(5, "aio")})
            return await consumer.committed(tp)
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == 5
    assert _rd_committed(cluster, "aio-standalone", [1]) == {1: 5}
    assert _kp_committed(cluster, "aio-standalone", [1]) == {1: (5, "aio")}


def test_metadata_over_the_limit_is_refused(cluster: Cluster) -> None:
    consumer = _rd_consumer(cluster, "rd-big-metadata")
    try:
        consumer.assign([TopicPartition(TOPIC, 0)])
        with pytest.raises(KafkaException, match="OFFSET_METADATA_TOO_LARGE"):
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, 1, metadata="x" * 4097)], asynchronous=False)
    finally:
        consumer.close()
    assert _rd_committed(cluster, "rd-big-metadata", [0]) == {0: -1001}


def test_admin_clients_list_alter_and_delete_offsets(cluster: Cluster) -> None:
    admin = AdminClient(cluster.client_config())
    group = "admin-offsets"
    altered = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC, 0, 11), TopicPartition(TOPIC, 1, 12)])]
    )
    altered[group].result(30)
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert {(tp.partition, tp.offset) for tp in listed.topic_partitions} == {(0, 11), (1, 12)}
    kp = KafkaAdminClient(**cluster.client_config(kafka_python=True))
    try:
        offsets = kp.list_group_offsets(group)[group]
        assert {tp.partition: o.offset for tp, o in offsets.items()} == {0: 11, 1: 12}
        kp.delete_group_offsets(group, [KTopicPartition(TOPIC, 0)])
        kp.alter_group_offsets(group, {KTopicPartition(TOPIC, 2): KOffsetAndMetadata(13, "", -1)})
        offsets = kp.list_group_offsets(group)[group]
        assert {tp.partition: o.offset for tp, o in offsets.items()} == {1: 12, 2: 13}
        assert group in {g["group_id"] for g in kp.list_groups()}
    finally:
        kp.close()
    groups = admin.list_consumer_groups().result(30)
    assert group in {g.group_id for g in groups.valid}
    # (a group known by its offsets only: Kafka's "simple" group, Empty, no protocol type)
    described = admin.describe_consumer_groups([group])[group].result(30)
    assert (described.state, described.members) == (ConsumerGroupState.EMPTY, [])
    kp = KafkaAdminClient(**cluster.client_config(kafka_python=True))
    try:
        info = kp.describe_groups([group])[group]  # (kafka-python 3: by group id, as dicts)
        assert (info["group_state"], info["members"], info["error"]) == ("Empty", [], None)
    finally:
        kp.close()
    deleted = admin.delete_consumer_groups([group])
    deleted[group].result(30)
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert listed.topic_partitions == []


def _coordinator(cluster: Cluster, group: str) -> int:
    """FindCoordinator to the first live broker, until it names one (the topic may be new)."""

    async def ask() -> int:
        deadline = time.monotonic() + 30
        for address in cluster.bootstrap_servers.split(","):
            host, port = address.rsplit(":", 1)
            try:
                conn = await KafkaConnection.open(host, int(port))
            except OSError:
                continue
            try:
                while True:
                    response = await conn.request(fc.FindCoordinatorRequest(version=3, key=group, key_type=0))
                    if response.error_code == 0:
                        return int(response.node_id)
                    assert time.monotonic() < deadline, response
                    await asyncio.sleep(0.2)
            finally:
                conn.close()
        raise AssertionError("no broker answers")

    return asyncio.run(ask())


def test_offsets_survive_their_coordinator_killed(cluster: Cluster) -> None:
    group = "survivor"
    consumer = _rd_consumer(cluster, group)
    try:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(3)])
        consumer.commit(offsets=[TopicPartition(TOPIC, p, 100 + p) for p in range(3)], asynchronous=False)
    finally:
        consumer.close()
    victim = _coordinator(cluster, group)
    cluster.kill_broker(victim)
    try:
        deadline = time.monotonic() + 60
        while True:  # (librdkafka retries the coordinator errors; a timeout leaves -1001)
            got = _rd_committed(cluster, group, [0, 1, 2])
            if all(offset >= 0 for offset in got.values()) or time.monotonic() > deadline:
                break
        assert got == {p: 100 + p for p in range(3)}
        assert _kp_committed(cluster, group, [0, 1, 2]) == {p: (100 + p, "") for p in range(3)}
        assert _coordinator(cluster, group) != victim
    finally:
        cluster.start_broker(victim)


def test_retention_removes_a_standalone_consumers_offsets(kmeta_cluster_factory: Callable[..., Cluster]) -> None:
    args = ("--offsets-retention-minutes", "0.03", "--offsets-retention-check-interval-ms", "300")
    with kmeta_cluster_factory(1, broker_args=args) as c:  # (retention 1.8 s, checked every 0.3 s)
        c.create_topic(TOPIC, partitions=1, rf=1)
        consumer = _rd_consumer(c, "forgotten")
        try:
            consumer.assign([TopicPartition(TOPIC, 0)])
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, 3)], asynchronous=False)
            committed_at = time.monotonic()
            assert consumer.committed([TopicPartition(TOPIC, 0)], timeout=30)[0].offset == 3
            deadline = committed_at + 30
            while (offset := consumer.committed([TopicPartition(TOPIC, 0)], timeout=30)[0].offset) == 3:
                assert time.monotonic() < deadline, "the offset outlived its retention by far"
                time.sleep(0.2)
            assert offset == -1001
            assert time.monotonic() - committed_at >= 1.8 - 0.1  # (not before the retention)
        finally:
            consumer.close()
