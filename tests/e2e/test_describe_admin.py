"""Cluster and topic description and topic configs through real Kafka admin clients on a real
(subprocess) cluster: one controller and three `kmeta broker` processes (racks a, a, b),
shared by the tests of this module."""

from __future__ import annotations

import warnings

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

with warnings.catch_warnings():  # kafka-python uses importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import describe_cluster as dc
from kmeta.protocol.messages import describe_topic_partitions as dtp
from tests.e2e.test_cluster_admin import RACKS, RackCluster

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")]


CLUSTER_ID = "describe-test"


class IdentifiedCluster(RackCluster):
    """With a cluster id: librdkafka's describe_cluster (over Metadata) crashes the process on
    a null cluster id (librdkafka 2.16), which brokers without --cluster-id report."""

    def _spawn(self, *args: str):  # type: ignore[no-untyped-def]
        return super()._spawn(*args, "--cluster-id", CLUSTER_ID)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = IdentifiedCluster(tmp_path_factory.mktemp("describe-cluster"))
    try:
        c.start()
        admin = AdminClient({"bootstrap.servers": c.bootstrap(1)})
        futures = admin.create_topics([NewTopic("wide", 7, 2), NewTopic("narrow", 1, 3)])
        for f in futures.values():
            f.result(10)
        yield c
    finally:
        c.stop()


def _kafka_python(cluster: RackCluster, broker: int = 1) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap(broker), request_timeout_ms=10000)


def test_kafka_python_describe_cluster_speaks_describe_cluster(cluster):
    admin = _kafka_python(cluster, 2)
    try:
        described = admin.describe_cluster()
    finally:
        admin.close()
    assert {b["broker_id"]: b["rack"] for b in described["brokers"]} == RACKS
    assert {b["broker_id"]: b["port"] for b in described["brokers"]} == cluster.client_ports
    assert described["controller_id"] in RACKS
    assert described["cluster_id"] == CLUSTER_ID


def test_confluent_describe_cluster_and_topics(cluster):
    from confluent_kafka import TopicCollection

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(3)})
    described = admin.describe_cluster(request_timeout=10).result(10)
    assert sorted(n.id for n in described.nodes) == [1, 2, 3]
    assert described.cluster_id == CLUSTER_ID
    assert described.controller.id in RACKS
    topics = admin.describe_topics(TopicCollection(["wide", "narrow"]), request_timeout=10)
    wide = topics["wide"].result(10)
    assert [p.id for p in wide.partitions] == list(range(7))
    assert all(len(p.replicas) == 2 and p.leader is not None for p in wide.partitions)
    assert [len(p.replicas) for p in topics["narrow"].result(10).partitions] == [3]


def test_kafka_python_describe_topic_partitions_pages(cluster):
    admin = _kafka_python(cluster, 1)
    try:
        seen: list[tuple[str, int]] = []
        cursor = None
        pages = 0
        while True:
            page = admin.describe_topic_partitions(["narrow", "wide"], response_partition_limit=3, cursor=cursor)
            pages += 1
            for t in page["topics"]:
                assert t["error_code"] == 0
                seen += [(t["name"], p["partition_index"]) for p in t["partitions"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == [("narrow", 0)] + [("wide", p) for p in range(7)]
        assert pages == 3
        ghost = admin.describe_topic_partitions(["ghost"])["topics"]
        assert [(t["name"], t["error_code"]) for t in ghost] == [("ghost", 3)]
    finally:
        admin.close()


async def test_raw_requests_on_every_broker(cluster):
    """Every broker answers the same from its own cache (the controller pushed it)."""
    for port in cluster.client_ports.values():
        conn = await KafkaConnection.open("127.0.0.1", port)
        try:
            resp = await conn.request(dc.DescribeClusterRequest(version=0), 5)
            assert [b.broker_id for b in resp.brokers] == [1, 2, 3]
            assert [b.rack for b in resp.brokers] == [RACKS[i] for i in (1, 2, 3)]
            resp = await conn.request(dc.DescribeClusterRequest(version=1, endpoint_type=2), 5)
            assert resp.error_code == 114  # MISMATCHED_ENDPOINT_TYPE
            resp = await conn.request(
                dtp.DescribeTopicPartitionsRequest(version=0, topics=(), response_partition_limit=5), 5
            )
            assert [(t.name, len(t.partitions)) for t in resp.topics] == [("narrow", 1), ("wide", 4)]
            assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == ("wide", 4)
        finally:
            conn.close()
