"""The worked examples of docs/testing.md, as real tests: real Kafka clients against kmeta.

These examples test what a client does with metadata and with the answers a leader gives:
which leader it routes to, how it reacts to NOT_LEADER_OR_FOLLOWER after a leader move, which
topics it believes exist, a stale broker, a missing controller. Records produced and consumed
back by each real client: tests/e2e/test_real_clients*.py.
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


def _produced(cluster: Cluster, broker_id: int) -> dict[str, float]:
    """Partitions of Produce requests a broker answered, by error (its /metrics)."""
    url = f"http://{cluster.config.host}:{cluster.config.metrics_port(broker_id)}/metrics"
    with urllib.request.urlopen(url, timeout=5) as answer:
        text = answer.read().decode()
    pattern = r'^kmeta_broker_produce_partitions_total\{error="(\w+)"\} (\S+)$'
    return {m.group(1): float(m.group(2)) for m in re.finditer(pattern, text, re.M)}


def test_a_producer_keeps_delivering_when_the_leader_moves(kmeta_cluster: Cluster) -> None:
    kmeta_cluster.create_topic("orders", assignment=[[1, 2, 3]])
    reports: list[tuple[object, int]] = []
    stats: list[dict] = []
    producer = Producer(
        {
            "bootstrap.servers": kmeta_cluster.bootstrap_servers,
            "acks": "all",
            "linger.ms": 5,
            # no periodic refresh: the producer learns of the move from the old leader's
            # NOT_LEADER_OR_FOLLOWER (with the new leader in it, KIP-951, or by a refresh)
            "topic.metadata.refresh.interval.ms": 300_000,
            "statistics.interval.ms": 100,
            "stats_cb": lambda text: stats.append(json.loads(text)),
        }
    )

    def send(first: int, count: int) -> None:  # a steady stream: one message every 5 ms
        for i in range(first, first + count):
            producer.produce(
                "orders", b"order-%d" % i, partition=0,
                on_delivery=lambda err, msg: reports.append((err, msg.offset())),
            )  # fmt: skip
            producer.poll(0.005)

    send(0, 40)
    assert producer.flush(10) == 0
    assert [r for r in reports if r[0] is not None] == []
    assert [offset for _, offset in reports] == list(range(40))  # broker 1's log end

    send(40, 40)  # still in flight towards broker 1 while it moves:
    kmeta_cluster.move_leader("orders", 0, 3)  # reassign [3, 1, 2], then a preferred election
    send(80, 40)
    assert producer.flush(30) == 0

    assert len(reports) == 120
    assert [r for r in reports if r[0] is not None] == []  # every message delivered
    old_leader = _produced(kmeta_cluster, 1)
    new_leader = _produced(kmeta_cluster, 3)
    assert new_leader.get("NONE", 0) > 0  # the new leader acknowledged some
    assert old_leader.get("NOT_LEADER_OR_FOLLOWER", 0) > 0  # the producer was told
    # broker 3 replicated broker 1's log (issue 29): its offsets go on from there, each once
    assert all(offset >= 40 for _, offset in reports[40:])
    assert len({offset for _, offset in reports}) == 120
    producer.poll(0.3)
    assert stats[-1]["topics"]["orders"]["partitions"]["0"]["leader"] == 3

    async def kmeta_client_follows() -> None:  # kmeta's own client sees the same leader
        async with MetadataClient(kmeta_cluster.bootstrap_servers) as client:
            view = await client.wait_on_metadata("orders", max_wait_s=10)
            leader = view.leader_for(("orders", 0))
            assert leader is not None
            assert leader.id == 3

    asyncio.run(kmeta_client_follows())


def test_kafka_python_producer_delivers(kmeta_cluster: Cluster) -> None:
    from kafka import KafkaProducer

    kmeta_cluster.create_topic("payments", 2, 2)
    producer = KafkaProducer(
        bootstrap_servers=kmeta_cluster.bootstrap_servers, acks="all", enable_idempotence=False,
        request_timeout_ms=10_000,
    )  # fmt: skip
    try:
        sent = [producer.send("payments", b"p-%d" % i, partition=i % 2) for i in range(10)]
        metadata = [future.get(timeout=10) for future in sent]
    finally:
        producer.close(timeout=5)
    assert sorted(m.offset for m in metadata if m.partition == 0) == [0, 1, 2, 3, 4]
    assert sorted(m.offset for m in metadata if m.partition == 1) == [0, 1, 2, 3, 4]


def test_a_client_sees_a_topic_disappear_after_delete(kmeta_cluster: Cluster) -> None:
    kmeta_cluster.create_topic("short-lived", 3, 3)
    admin = AdminClient({"bootstrap.servers": kmeta_cluster.bootstrap_servers})
    assert len(admin.list_topics(timeout=5).topics["short-lived"].partitions) == 3

    kmeta_cluster.delete_topic("short-lived")  # with the barrier: gone from every broker

    assert "short-lived" not in admin.list_topics(timeout=5).topics
    # asked for by name (librdkafka allows auto-creation there), it comes back as with Kafka's
    # default auto.create.topics.enable: LEADER_NOT_AVAILABLE first, then num.partitions (1)
    asked = admin.list_topics(topic="short-lived", timeout=5).topics["short-lived"]
    assert asked.error is not None
    assert asked.error.name() == "LEADER_NOT_AVAILABLE"
    eventually(lambda: len(kmeta_cluster.metadata(1).topics.get("short-lived", {})) == 1, 10)


def test_a_client_of_a_delayed_broker_reads_stale_then_fresh_metadata(
    kmeta_cluster_factory: Callable[..., Cluster],
) -> None:
    # Kafka's behaviour (no propagation barrier): CreateTopics answers once the controller
    # committed, while broker 2 learns of it 3 s later
    with kmeta_cluster_factory(3, barrier=False) as cluster:
        cluster.fault(2, delay=3.0)
        asked = time.monotonic()  # the delay starts after this (when the controller sends)
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
        assert time.monotonic() - asked >= 2.9  # (the answer to CreateTopics took some of it)
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
