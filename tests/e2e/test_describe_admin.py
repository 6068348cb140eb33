"""Cluster and topic description and topic configs through real Kafka admin clients on a real
(subprocess) cluster: one controller and three `kmeta broker` processes (racks a, a, b),
shared by the tests of this module."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import warnings

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

with warnings.catch_warnings():  # kafka-python uses importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import describe_cluster as dc
from kmeta.protocol.messages import describe_configs as dcf
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


# -- topic configs ----------------------------------------------------------------------------
def _confluent_configs(cluster, broker: int, topic: str) -> dict:
    from confluent_kafka.admin import ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(broker)})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)], request_timeout=10).values()
    return future.result(10)


def test_confluent_create_describe_and_incrementally_alter_topic_configs(cluster):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    created = admin.create_topics(
        [NewTopic("cfg", 2, 2, config={"retention.ms": " 3600000 ", "cleanup.policy": "compact"})]
    )
    created["cfg"].result(10)
    for broker in (1, 2, 3):  # every broker holds them once the answer came (barrier)
        described = _confluent_configs(cluster, broker, "cfg")
        assert described["retention.ms"].value == "3600000"
        assert described["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert described["cleanup.policy"].value == "compact"
        segment = described["segment.bytes"]
        assert (segment.value, segment.source, segment.is_default) == (
            "1073741824", ConfigSource.DEFAULT_CONFIG.value, True
        )
        assert len(described) == 36  # every topic config Kafka 3.9 defines

    ops = [
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET),
    ]
    (future,) = admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, "cfg", incremental_configs=ops)]).values()
    future.result(10)
    for broker in (1, 2, 3):
        described = _confluent_configs(cluster, broker, "cfg")
        assert described["retention.ms"].value == "1000"
        assert (described["cleanup.policy"].value, described["cleanup.policy"].source) == (
            "delete", ConfigSource.DEFAULT_CONFIG.value
        )
        assert described["min.insync.replicas"].value == "2"

    bad = [
        ("retention.ms", "soon"),  # not a LONG
        ("no.such.config", "1"),
        ("cleanup.policy", "compact,archive"),
    ]
    for name, value in bad:
        entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        (future,) = admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, "cfg", incremental_configs=[entry])]).values()
        with pytest.raises(KafkaException) as info:
            future.result(10)
        assert info.value.args[0].code() == KafkaError.INVALID_CONFIG, name
    entry = ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.SET)
    (future,) = admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, "ghost", incremental_configs=[entry])]).values()
    with pytest.raises(KafkaException) as info:
        future.result(10)
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert _confluent_configs(cluster, 2, "cfg")["retention.ms"].value == "1000"  # unchanged

    (future,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, "3")]).values()
    broker3 = future.result(10)
    assert (broker3["broker.id"].value, broker3["broker.rack"].value) == ("3", RACKS[3])
    assert broker3["broker.id"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert broker3["log.segment.bytes"].value == "1073741824"


def test_kafka_python_describe_and_alter_configs(cluster):
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafka.admin import NewTopic as KNewTopic

    admin = _kafka_python(cluster, 2)
    try:
        admin.create_topics([KNewTopic("kp-cfg", num_partitions=1, replication_factor=1)])
        # IncrementalAlterConfigs (the client's default), then legacy AlterConfigs (a whole set)
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-cfg", configs={"retention.bytes": "1048576"})])
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-cfg")], include_synonyms=True)
        modified = described["topic"]["kp-cfg"]
        assert set(modified) == {"retention.bytes"}
        assert modified["retention.bytes"]["value"] == "1048576"
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "kp-cfg", configs={"segment.ms": "60000"})], incremental=False
        )
        modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-cfg")])["topic"]["kp-cfg"]
        # (the client re-sends the other modified keys: AlterConfigs replaces the whole set)
        assert {k: v["value"] for k, v in modified.items()} == {"segment.ms": "60000", "retention.bytes": "1048576"}
    finally:
        admin.close()


def test_configs_survive_controller_restart_and_broker_kill(cluster):
    import signal

    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    from tests.e2e.test_cluster import wait_for

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    admin.create_topics([NewTopic("durable-cfg", 1, 3)])["durable-cfg"].result(10)
    entry = ConfigEntry("max.message.bytes", "2048", incremental_operation=AlterConfigOpType.SET)
    (future,) = admin.incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, "durable-cfg", incremental_configs=[entry])]
    ).values()
    future.result(10)

    cluster.controller.send_signal(signal.SIGTERM)  # the controller restarts from its store
    cluster.controller.wait(10)
    cluster.brokers[2].kill()  # and broker 2 loses its cache
    cluster.brokers[2].wait(10)
    cluster.start_controller()

    # The restarted controller resumes the killed broker 2's session from its store, and
    # refuses another incarnation of broker 2 (these brokers keep no state dir) until that
    # session expired. Broker 2 starts once the others stopped listing it, so a broker
    # listing it afterwards lists the new process (which the next test asks for its configs).
    def listed_by_the_others() -> list[list[int]]:
        try:
            return [asyncio.run(_listed_by(cluster.client_ports[b])) for b in (1, 3)]
        except (OSError, ConnectionError, TimeoutError):
            return []

    wait_for(lambda: listed_by_the_others() == [[1, 3], [1, 3]], 30)
    cluster.start_broker(2)

    # (broker 2 itself, and every broker listing it: an AdminClient asks whichever broker it
    # picks, so broker 1 or 3 could answer from before the restarts)
    def served() -> bool:
        try:
            return asyncio.run(_served_by_every_broker("durable-cfg", "max.message.bytes", cluster))
        except (OSError, ConnectionError, TimeoutError):
            return False

    wait_for(served, 30)
    assert _confluent_configs(cluster, 3, "durable-cfg")["max.message.bytes"].value == "2048"


async def _listed_by(port: int) -> list[int]:
    """The brokers the broker at ``port`` lists in DescribeCluster."""
    conn = await KafkaConnection.open("127.0.0.1", port)
    try:
        brokers = await conn.request(dc.DescribeClusterRequest(version=0), 5)
    finally:
        conn.close()
    return [b.broker_id for b in brokers.brokers]


async def _served_by_every_broker(topic: str, key: str, cluster: RackCluster) -> bool:
    """Each broker answers ``topic``'s ``key`` as 2048 itself and lists all three brokers."""
    for port in cluster.client_ports.values():
        if await _listed_by(port) != [1, 2, 3]:
            return False
        conn = await KafkaConnection.open("127.0.0.1", port)
        try:
            resource = dcf.DescribeConfigsResource(2, topic, (key,))  # (2: a topic)
            configs = await conn.request(dcf.DescribeConfigsRequest(version=4, resources=(resource,)), 5)
        finally:
            conn.close()
        (result,) = configs.results
        if result.error_code:
            return False
        if [(c.name, c.value) for c in result.configs] != [(key, "2048")]:
            return False
    return True


def _kmeta(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kmeta", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_kmeta_configs_cli(cluster):
    bootstrap = cluster.bootstrap(3)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("cli-cfg", 1, 1)])["cli-cfg"].result(10)
    done = _kmeta(
        "configs", "alter", "--bootstrap-server", bootstrap, "--entity-type", "topics", "--entity-name", "cli-cfg",
        "--add-config", "retention.ms=120000,cleanup.policy=[compact,delete]",
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "Completed updating config for topic cli-cfg.\n"), done.stderr
    shown = _kmeta("configs", "describe", "--bootstrap-server", bootstrap, "--entity-type", "topics", "--entity-name", "cli-cfg")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        "Dynamic configs for topic cli-cfg are:",
        "  retention.ms=120000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=120000}",
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}",
    ]
    done = _kmeta(
        "configs", "alter", "--bootstrap-server", bootstrap, "--entity-type", "topics", "--entity-name", "cli-cfg",
        "--delete-config", "retention.ms",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    every = _kmeta("configs", "describe", "--bootstrap-server", bootstrap, "--entity-type", "topics", "--entity-name", "cli-cfg", "--all")
    assert "  retention.ms=604800000 sensitive=false synonyms={}" in every.stdout.splitlines()
    broker = _kmeta("configs", "describe", "--bootstrap-server", bootstrap, "--entity-type", "brokers", "--entity-name", "2", "--all")
    assert broker.returncode == 0, broker.stderr
    assert broker.stdout.splitlines()[0] == "All configs for broker 2 are:"
    assert "  broker.rack=rack-a sensitive=false synonyms={STATIC_BROKER_CONFIG:broker.rack=rack-a}" in broker.stdout

    bad = _kmeta(
        "configs", "alter", "--bootstrap-server", bootstrap, "--entity-type", "topics", "--entity-name", "cli-cfg",
        "--add-config", "retention.ms=soon",
    )  # fmt: skip
    assert bad.returncode != 0
    assert bad.stderr.strip().splitlines() == [
        "Error: topic 'cli-cfg': INVALID_CONFIG: Invalid config value for resource ConfigResource(type=TOPIC, "
        "name='cli-cfg'): Invalid value soon for configuration retention.ms: Not a number of type LONG"
    ]
    ghost = _kmeta("configs", "describe", "--bootstrap-server", bootstrap, "--entity-type", "topics", "--entity-name", "ghost")
    assert (ghost.returncode, ghost.stderr.strip()) == (1, "Error: topic 'ghost': UNKNOWN_TOPIC_OR_PARTITION")
