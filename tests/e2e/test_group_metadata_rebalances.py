"""Metadata drives a classic group's rebalances (issue 31, point 5), with confluent-kafka
members (and a kafka-python one for a pattern): partitions added to a subscribed topic
(CreatePartitions) and a topic matching a regex subscription created or deleted. In the
classic protocol the coordinator knows nothing of subscriptions; the members see the change in
their Metadata refresh (``topic.metadata.refresh.interval.ms``, set low here), rejoin, and the
leader's assignment takes the new partitions in (or leaves the deleted topic out). Each test
also consumes from what joined, so the new partitions are not only assigned but served."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from kmeta.testing import Cluster

pytestmark = pytest.mark.e2e

#: how long a group may take to see a metadata change and settle (a refresh, a rejoin, a sync)
SETTLE_S = 60.0
#: kafka-python's poll() while a rejoin is due. 3.0.12 drops the assignment of a JoinGroup and
#: SyncGroup that outlive one poll() when the member leads: the leader's assignment already
#: matches the metadata, so the next poll() sees no rejoin due and never applies the answer
#: (seen under load with 100 ms, the wire round trips taking 5-10 ms). A poll() that outlasts the
#: whole join keeps the test on what kmeta answers.
JOIN_POLL_MS = 2000
Parts = set[tuple[str, int]]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(1, offsets_topic_num_partitions=3, group_initial_rebalance_delay_ms=200) as c:
        yield c


class Member:
    """A confluent-kafka member of ``group`` and what it was last assigned."""

    def __init__(self, cluster: Cluster, group: str, subscription: list[str]) -> None:
        self.consumer = Consumer({
            **cluster.client_config(), "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300, "topic.metadata.refresh.interval.ms": 500,
        })  # fmt: skip
        self.assigned: Parts = set()
        self.assignments = 0
        self.consumer.subscribe(subscription, on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, _c: Any, parts: list[Any]) -> None:
        self.assigned = {(p.topic, p.partition) for p in parts}
        self.assignments += 1

    def _revoke(self, _c: Any, _parts: list[Any]) -> None:
        self.assigned = set()


def split(members: list[Member], expected: Parts) -> bool:
    """The members' assignments are disjoint, non-empty and cover exactly ``expected``."""
    shares = [m.assigned for m in members]
    return (
        all(shares) and sum(map(len, shares)) == len(expected) and set().union(*shares) == expected
    )


def poll_until(
    members: list[Member],
    done: Callable[[], bool],
    seen: dict[tuple[str, int], set[bytes]] | None = None,
    deleted: str | None = None,
) -> None:
    """Poll every member until ``done()``; records go into ``seen`` by partition. librdkafka
    reports a ``deleted`` topic it still knew of as UNKNOWN_TOPIC_OR_PART (Kafka's answer to a
    Metadata request naming it); any other error fails."""
    deadline = time.monotonic() + SETTLE_S
    while not done():
        assert time.monotonic() < deadline, [sorted(m.assigned) for m in members]
        for m in members:
            message = m.consumer.poll(0.05)
            if message is None:
                continue
            error = message.error()
            if error is not None and deleted is not None and deleted in error.str():
                assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, error
                continue
            assert error is None, error
            if seen is not None:
                seen.setdefault((message.topic(), message.partition()), set()).add(
                    message.value() or b""
                )


def produce(cluster: Cluster, parts: Parts, tag: bytes) -> dict[tuple[str, int], set[bytes]]:
    """Ten records into each of ``parts``; returns them by partition."""
    producer = Producer({**cluster.client_config(), "acks": "all", "linger.ms": 2})
    sent: dict[tuple[str, int], set[bytes]] = {}
    for topic, partition in sorted(parts):
        for i in range(10):
            value = b"%s-%s-%d-%d" % (tag, topic.encode(), partition, i)
            producer.produce(topic, value, partition=partition)
            sent.setdefault((topic, partition), set()).add(value)
    assert producer.flush(30) == 0
    return sent


def every(topic: str, partitions: int) -> Parts:
    return {(topic, p) for p in range(partitions)}


def test_partitions_added_to_a_subscribed_topic_are_assigned_and_consumed(cluster: Cluster) -> None:
    cluster.create_topic("grow", 2, 1)
    members = [Member(cluster, "growing", ["grow"]) for _ in range(2)]
    try:
        poll_until(members, lambda: split(members, every("grow", 2)))
        before = [m.assignments for m in members]
        cluster.add_partitions("grow", 6)
        poll_until(members, lambda: split(members, every("grow", 6)))
        assert sorted(len(m.assigned) for m in members) == [3, 3]  # range: 3 each of 6
        assert all(
            m.assignments > n for m, n in zip(members, before, strict=True)
        )  # both rebalanced
        sent = produce(cluster, every("grow", 6), b"g")
        seen: dict[tuple[str, int], set[bytes]] = {}
        poll_until(members, lambda: seen == sent, seen)
        assert {p for _, p in seen} == set(range(6))  # partitions 2..5, new, served too
    finally:
        for m in members:
            m.consumer.close()


def test_a_regex_subscription_takes_in_a_created_topic_and_lets_go_of_a_deleted_one(
    cluster: Cluster,
) -> None:
    cluster.create_topic("orders-eu", 3, 1)
    cluster.create_topic("audit", 3, 1)  # (does not match: never assigned)
    members = [Member(cluster, "regex", ["^orders-.*"]) for _ in range(2)]
    try:
        poll_until(members, lambda: split(members, every("orders-eu", 3)))
        cluster.create_topic("orders-us", 3, 1)
        both = every("orders-eu", 3) | every("orders-us", 3)
        poll_until(members, lambda: split(members, both))
        sent = produce(cluster, both, b"r")
        seen: dict[tuple[str, int], set[bytes]] = {}
        poll_until(members, lambda: seen == sent, seen)
        cluster.delete_topic("orders-eu")
        poll_until(members, lambda: split(members, every("orders-us", 3)), deleted="orders-eu")
        assert not any(t == "audit" for m in members for t, _ in m.assigned)
        more = produce(cluster, every("orders-us", 3), b"after")
        seen = {}
        # (nothing was committed: the rebalance may hand orders-us's first records out again)
        poll_until(
            members,
            lambda: all(v <= seen.get(k, set()) for k, v in more.items()),
            seen,
            "orders-eu",
        )
    finally:
        for m in members:
            m.consumer.close()


def test_kafka_python_pattern_subscription_follows_topics_created_and_deleted(
    cluster: Cluster,
) -> None:
    """The same with kafka-python's KafkaConsumer (its own Metadata refresh,
    ``metadata_max_age_ms``, and its own leader-side assignor)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaConsumer

    cluster.create_topic("ledger-a", 2, 1)
    kc = KafkaConsumer(
        group_id="kp-pattern", enable_auto_commit=False, auto_offset_reset="earliest",
        session_timeout_ms=6000, heartbeat_interval_ms=300, metadata_max_age_ms=500,
        **cluster.client_config(kafka_python=True),
    )  # fmt: skip
    kc.subscribe(pattern="^ledger-.*")

    def assigned_becomes(expected: Parts) -> None:
        deadline = time.monotonic() + SETTLE_S
        while {(tp.topic, tp.partition) for tp in kc.assignment()} != expected:
            assert time.monotonic() < deadline, kc.assignment()
            kc.poll(timeout_ms=JOIN_POLL_MS)

    try:
        assigned_becomes(every("ledger-a", 2))
        cluster.create_topic("ledger-b", 3, 1)
        assigned_becomes(every("ledger-a", 2) | every("ledger-b", 3))
        sent = produce(cluster, every("ledger-b", 3), b"kp")
        seen: dict[tuple[str, int], set[bytes]] = {}
        deadline = time.monotonic() + SETTLE_S
        while seen != sent:
            assert time.monotonic() < deadline, seen.keys()
            for tp, records in kc.poll(timeout_ms=100).items():
                seen.setdefault((tp.topic, tp.partition), set()).update(r.value for r in records)
        cluster.delete_topic("ledger-a")
        assigned_becomes(every("ledger-b", 3))
    finally:
        kc.close()
