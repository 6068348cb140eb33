"""KIP-848 consumer groups with librdkafka (confluent-kafka, ``group.protocol=consumer``) over
loopback: the server-side assignor splits a 6-partition topic between three members (each
partition once), a member leaving hands its partitions on, partitions added to the topic are
assigned by the coordinator without any client Metadata refresh, and
AdminClient.describe_consumer_groups (ConsumerGroupDescribe) reports the group."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, Producer
from confluent_kafka.admin import AdminClient

from kmeta.testing import Cluster

pytestmark = pytest.mark.e2e

PARTITIONS = 6
SETTLE_S = 60.0
Member = tuple[Consumer, list[list[int]]]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(
        1, offsets_topic_num_partitions=3,
        broker_args=("--group-consumer-heartbeat-interval-ms", "300", "--group-consumer-session-timeout-ms", "6000"),
    ) as c:  # fmt: skip
        yield c


def consumer(cluster: Cluster, group: str, topic: str, **extra: Any) -> Member:
    """A KIP-848 member subscribed to ``topic``; the list gets each assignment it is given."""
    assignments: list[list[int]] = []
    c = Consumer({
        **cluster.client_config(), "group.id": group, "group.protocol": "consumer",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        # (no periodic refresh: new partitions must come from the coordinator)
        "topic.metadata.refresh.interval.ms": -1, **extra,
    })  # fmt: skip
    c.subscribe([topic], on_assign=lambda _c, parts: assignments.append(sorted(p.partition for p in parts)))
    return c, assignments


def current(members: list[Member]) -> list[list[int]]:
    return [sorted(p.partition for p in c.assignment()) for c, _ in members]


def settle(members: list[Member], until: Callable[[], bool]) -> None:
    deadline = time.monotonic() + SETTLE_S
    while not until():
        assert time.monotonic() < deadline, current(members)
        for c, _ in members:
            c.poll(0.05)


def split(assignments: list[list[int]], partitions: int, sizes: list[int]) -> bool:
    flat = sorted(p for a in assignments for p in a)
    return flat == list(range(partitions)) and sorted(len(a) for a in assignments) == sorted(sizes)


def describe(cluster: Cluster, group: str) -> Any:
    admin = AdminClient(cluster.client_config())
    return admin.describe_consumer_groups([group])[group].result(30)


def test_three_members_split_six_partitions_then_one_leaves(cluster: Cluster) -> None:
    cluster.create_topic("kip848", PARTITIONS, 1)
    members = [consumer(cluster, "g848", "kip848") for _ in range(3)]
    settle(members, lambda: split(current(members), PARTITIONS, [2, 2, 2]))
    described = describe(cluster, "g848")
    assert described.type == ConsumerGroupType.CONSUMER
    assert str(described.state).endswith("STABLE")
    assert len(described.members) == 3
    owned = sorted(tp.partition for m in described.members for tp in m.assignment.topic_partitions)
    assert owned == list(range(PARTITIONS))
    # records are consumed once each by the group
    producer = Producer({**cluster.client_config(), "acks": "all"})
    values = [b"v-%d" % i for i in range(120)]
    for i, v in enumerate(values):
        producer.produce("kip848", v, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    seen: Counter[bytes] = Counter()
    deadline = time.monotonic() + SETTLE_S
    while len(seen) < len(values):
        assert time.monotonic() < deadline, len(seen)
        for c, _ in members:
            for message in c.consume(50, 0.05):
                assert message.error() is None, message.error()
                seen[message.value()] += 1
    assert set(seen.values()) == {1}
    leaving = members.pop()
    leaving[0].close()  # ConsumerGroupHeartbeat with epoch -1
    settle(members, lambda: split(current(members), PARTITIONS, [3, 3]))
    assert len(describe(cluster, "g848").members) == 2
    for c, _ in members:
        c.close()


def test_added_partitions_are_assigned_without_a_metadata_refresh(cluster: Cluster) -> None:
    cluster.create_topic("grows", 2, 1)
    members = [consumer(cluster, "grows-group", "grows") for _ in range(2)]
    settle(members, lambda: split(current(members), 2, [1, 1]))
    cluster.add_partitions("grows", PARTITIONS)
    settle(members, lambda: split(current(members), PARTITIONS, [3, 3]))
    for c, _ in members:
        c.close()


def test_describing_a_group_that_does_not_exist(cluster: Cluster) -> None:
    admin = AdminClient(cluster.client_config())
    future = admin.describe_consumer_groups(["nobody-here"])["nobody-here"]
    described = future.result(30)  # (a classic-style Dead answer from DescribeGroups' fallback)
    assert str(described.state).endswith(("DEAD", "UNKNOWN"))


def test_a_regex_subscription_follows_topics_created_and_deleted(cluster: Cluster) -> None:
    cluster.create_topic("rx-one", 2, 1)
    member = consumer(cluster, "rx-group", "^rx-.*")
    settle([member], lambda: current([member]) == [[0, 1]])
    cluster.create_topic("rx-two", 3, 1)
    assigned = lambda: sorted((p.topic, p.partition) for p in member[0].assignment())  # noqa: E731
    settle([member], lambda: assigned() == [("rx-one", 0), ("rx-one", 1), ("rx-two", 0), ("rx-two", 1), ("rx-two", 2)])
    described = describe(cluster, "rx-group")
    assert described.members[0].assignment.topic_partitions
    cluster.delete_topic("rx-one")
    settle([member], lambda: assigned() == [("rx-two", 0), ("rx-two", 1), ("rx-two", 2)])
    member[0].close()


def test_the_group_carries_on_after_its_coordinator_is_killed() -> None:
    """The new leader of the group's partition loads its records: the same members keep
    their epochs and partitions, and the group is Stable at the same group epoch."""
    args = ("--group-consumer-heartbeat-interval-ms", "300", "--group-consumer-session-timeout-ms", "30000")
    with Cluster(3, offsets_topic_num_partitions=3, broker_args=args) as cluster:
        cluster.create_topic("survive", PARTITIONS, 3)
        members = [consumer(cluster, "survivor", "survive") for _ in range(3)]
        settle(members, lambda: split(current(members), PARTITIONS, [2, 2, 2]))
        before = describe(cluster, "survivor")
        assert str(before.state).endswith("STABLE")
        coordinator = before.coordinator.id
        cluster.kill_broker(coordinator)
        deadline = time.monotonic() + SETTLE_S
        while True:
            for c, _ in members:
                c.poll(0.05)
            try:
                after = describe(cluster, "survivor")
            except Exception:  # (the coordinator moving: ask again)
                after = None
            if after is not None and after.coordinator.id != coordinator and str(after.state).endswith("STABLE"):
                break
            assert time.monotonic() < deadline
        assert {m.member_id for m in after.members} == {m.member_id for m in before.members}
        assert {m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions) for m in after.members} == {
            m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions) for m in before.members
        }
        assert split(current(members), PARTITIONS, [2, 2, 2])
        for c, _ in members:
            c.close()


def consume(members: list[Member], seen: Counter[bytes], until: Callable[[], bool]) -> None:
    """Poll every member; each record is counted and its offset committed (OffsetCommit v9
    with the member's epoch) before the next poll, so a moved partition resumes there."""
    deadline = time.monotonic() + SETTLE_S
    while not until():
        assert time.monotonic() < deadline, (len(seen), current(members))
        for c, _ in members:
            for message in c.consume(50, 0.05):
                assert message.error() is None, message.error()
                seen[message.value()] += 1
                c.commit(message, asynchronous=False)


def produce(cluster: Cluster, topic: str, values: list[bytes]) -> None:
    producer = Producer({**cluster.client_config(), "acks": "all", "linger.ms": 2})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def test_every_record_once_across_a_member_leaving_and_one_killed(cluster: Cluster) -> None:
    cluster.create_topic("once848", PARTITIONS, 1)
    members = [consumer(cluster, "once848", "once848") for _ in range(2)]
    # a third member in its own process, killed -9 later: its session ends, its partitions move
    script = (
        "import sys, time\nfrom confluent_kafka import Consumer\n"
        "c = Consumer({'bootstrap.servers': sys.argv[1], 'group.id': 'once848', 'group.protocol': 'consumer',"
        " 'enable.auto.commit': False, 'auto.offset.reset': 'earliest'})\n"
        "c.subscribe(['once848'])\nwhile True:\n    c.poll(0.1)\n"
    )
    doomed = subprocess.Popen([sys.executable, "-c", script, cluster.client_config()["bootstrap.servers"]])
    try:
        settle(members, lambda: sorted(len(a) for a in current(members)) == [2, 2])  # (the third has 2)
        seen: Counter[bytes] = Counter()
        first = [b"a-%d" % i for i in range(120)]
        produce(cluster, "once848", first)
        consume(members, seen, lambda: len(seen) == 80)  # (the third member's 40 are not counted)
        leaving = members.pop()
        leaving[0].close()  # leaves: epoch -1
        doomed.kill()  # no leave: fenced when its session (6 s here) ends
        doomed.wait(10)
        # (consumed while they move: the doomed member's uncommitted records come to the one
        # left as its partitions do, and settle()'s polls would drop what they return)
        consume(members, seen, lambda: current(members) == [list(range(PARTITIONS))])
        second = [b"b-%d" % i for i in range(120)]
        produce(cluster, "once848", second)
        consume(members, seen, lambda: len(seen) == len(first) + len(second))
        assert set(seen) == set(first + second)
        assert set(seen.values()) == {1}
        assert len(describe(cluster, "once848").members) == 1
    finally:
        doomed.kill()
        for c, _ in members:
            c.close()


def test_a_classic_group_moves_to_the_consumer_protocol_with_its_offsets(cluster: Cluster) -> None:
    """Upgrading consumers from group.protocol=classic to consumer: once the classic group is
    Empty, the first KIP-848 member takes its id over and the committed offsets stay."""
    cluster.create_topic("migrate", PARTITIONS, 1)
    values = [b"m-%d" % i for i in range(60)]
    produce(cluster, "migrate", values)
    classic = Consumer({
        **cluster.client_config(), "group.id": "migrating", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
    })  # fmt: skip
    classic.subscribe(["migrate"])
    seen: Counter[bytes] = Counter()
    deadline = time.monotonic() + SETTLE_S
    while len(seen) < 30:
        assert time.monotonic() < deadline, len(seen)
        for message in classic.consume(1, 0.1):
            assert message.error() is None, message.error()
            seen[message.value()] += 1
            classic.commit(message, asynchronous=False)
    classic.close()  # LeaveGroup: the classic group is Empty, its offsets committed
    members = [consumer(cluster, "migrating", "migrate") for _ in range(2)]
    consume(members, seen, lambda: len(seen) == len(values))
    assert set(seen.values()) == {1}  # (resumed from the classic group's offsets)
    described = describe(cluster, "migrating")
    assert described.type == ConsumerGroupType.CONSUMER
    for c, _ in members:
        c.close()
