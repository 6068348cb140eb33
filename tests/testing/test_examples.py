"""The worked examples of docs/testing.md, as real tests: real Kafka clients against kmeta.

kmeta is a metadata plane: it answers ApiVersions, Metadata and the admin APIs, and serves no
Produce or Fetch. So these examples test what a client does with *metadata*: which leader it
routes to, which topics it believes exist, how it reacts to a stale broker or a missing
controller. (A producer's records cannot be delivered to kmeta; the leader-move example shows
the producer's own metadata following the move instead.)
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.request
import warnings
from collections.abc import Callable

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

with warnings.catch_warnings():  # kafka-python uses importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic

from kmeta.client import MetadataClient
from kmeta.testing import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")]


def eventually(check: Callable[[], bool], timeout_s: float = 10.0) -> float:
    """Seconds until ``check()`` held; AssertionError after ``timeout_s``."""
    t0 = time.monotonic()
    while not check():
        assert time.monotonic() - t0 < timeout_s, f"not within {timeout_s} s"
        time.sleep(0.02)
    return time.monotonic() - t0


def test_a_producer_routes_to_the_new_leader_after_a_leader_move(kmeta_cluster: Cluster) -> None:
    kmeta_cluster.create_topic("orders", assignment=[[1, 2, 3]])
    stats: list[dict] = []
    producer = Producer(
        {
            "bootstrap.servers": kmeta_cluster.bootstrap_servers,
            "topic.metadata.refresh.interval.ms": 250,
            "statistics.interval.ms": 50,  # the producer's own view: stats -> topics -> partitions
            "stats_cb": lambda text: stats.append(json.loads(text)),
        }
    )

    def routes_to() -> int | None:
        """The leader the producer would send partition 0's batches to now."""
        producer.poll(0.05)
        for s in reversed(stats):
            if "orders" in s.get("topics", {}):
                return int(s["topics"]["orders"]["partitions"]["0"]["leader"])
        return None

    assert producer.list_topics("orders", timeout=5).topics["orders"].partitions[0].leader == 1
    eventually(lambda: routes_to() == 1)

    kmeta_cluster.move_leader("orders", 0, 3)  # reassign [3, 1, 2], then a preferred election

    eventually(lambda: routes_to() == 3)  # its next metadata refresh follows the move
    assert producer.list_topics("orders", timeout=5).topics["orders"].partitions[0].leader == 3

    async def kmeta_client_follows() -> None:  # kmeta's own client sees the same
        async with MetadataClient(kmeta_cluster.bootstrap_servers) as client:
            view = await client.wait_on_metadata("orders", max_wait_s=10)
            leader = view.leader_for(("orders", 0))
            assert leader is not None
            assert leader.id == 3

    asyncio.run(kmeta_client_follows())


def test_a_client_sees_a_topic_disappear_after_delete(kmeta_cluster: Cluster) -> None:
    kmeta_cluster.create_topic("short-lived", 3, 3)
    admin = AdminClient({"bootstrap.servers": kmeta_cluster.bootstrap_servers})
    assert len(admin.list_topics(timeout=5).topics["short-lived"].partitions) == 3

    kmeta_cluster.delete_topic("short-lived")  # with the barrier: gone from every broker

    assert "short-lived" not in admin.list_topics(timeout=5).topics
    asked = admin.list_topics(topic="short-lived", timeout=5).topics["short-lived"]
    assert asked.error is not None
    assert asked.error.name() == "UNKNOWN_TOPIC_OR_PART"


def test_a_client_of_a_delayed_broker_reads_stale_then_fresh_metadata(
    kmeta_cluster_factory: Callable[..., Cluster],
) -> None:
    # Kafka's behaviour (no propagation barrier): CreateTopics answers once the controller
    # committed, while broker 2 learns of it 3 s later
    with kmeta_cluster_factory(3, barrier=False) as cluster:
        cluster.fault(2, delay=3.0)
        cluster.create_topic("late", 3, 3)
        created = time.monotonic()
        host, port = cluster.address(2)

        def broker_2_answers() -> bool:
            """Whether a new client bootstrapped on broker 2 sees the topic, in an answer
            that broker 2 gave (librdkafka may ask any broker it learned of; orig_broker_id
            says which answered, -1 being the bootstrap connection)."""
            for _ in range(100):
                client = AdminClient({"bootstrap.servers": f"{host}:{port}", "log_level": 0})
                md = client.list_topics(topic="late", timeout=5)
                if md.orig_broker_id in (-1, 2):
                    return md.topics["late"].error is None
            raise AssertionError("broker 2 never answered")

        assert not broker_2_answers()  # stale: UNKNOWN_TOPIC_OR_PART ...
        assert time.monotonic() - created < 3.0
        assert "late" in cluster.metadata(1).topics  # ... while broker 1 already serves it
        eventually(broker_2_answers, 10)  # then fresh, once the delayed update arrived
        assert time.monotonic() - created >= 2.9
        assert cluster.metadata(2).topics["late"] == cluster.metadata(1).topics["late"]


def _create_topics_requests(cluster: Cluster) -> float:
    """CreateTopics requests every broker received so far (their /metrics)."""
    total = 0.0
    for i in cluster.live_brokers:
        url = f"http://{cluster.config.host}:{cluster.config.metrics_port(i)}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            text = answer.read().decode()
        for m in re.finditer(r'^kmeta_requests_total\{[^}]*api="CreateTopics"[^}]*\} (\S+)$', text, re.M):
            total += float(m.group(1))
    return total


def test_kafka_python_admin_retries_not_controller_while_the_controller_is_down(
    kmeta_cluster: Cluster,
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=kmeta_cluster.bootstrap_servers, request_timeout_ms=10_000)
    try:
        kmeta_cluster.stop_controller()
        before = _create_topics_requests(kmeta_cluster)
        # the broker cannot forward: NOT_CONTROLLER; kafka-python refreshes the controller id
        # (a Metadata request), sends once more, and gives up when that is NOT_CONTROLLER too
        with pytest.raises(RuntimeError, match="Failed to find active controller id"):
            admin.create_topics([KNewTopic("while-no-controller", 1, 1)])
        assert _create_topics_requests(kmeta_cluster) - before == 2  # the request and its retry

        kmeta_cluster.start_controller()  # failover done: the same call now succeeds
        admin.create_topics([KNewTopic("while-no-controller", 1, 1)])
        assert "while-no-controller" in kmeta_cluster.metadata(1).topics
    finally:
        admin.close()


def test_the_readme_example(kmeta_cluster: Cluster) -> None:  # README.md, docs/testing.md
    kmeta_cluster.create_topic("orders", partitions=6, rf=3)
    admin = AdminClient({"bootstrap.servers": kmeta_cluster.bootstrap_servers})
    assert len(admin.list_topics(timeout=5).topics["orders"].partitions) == 6
    kmeta_cluster.kill_broker(2)  # SIGKILL: a crash
    kmeta_cluster.wait_converged(10)  # fenced after the session timeout
    assert 2 not in admin.list_topics(timeout=5).brokers
