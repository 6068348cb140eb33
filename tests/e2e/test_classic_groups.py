"""Classic consumer groups with real clients over loopback: confluent-kafka (librdkafka),
kafka-python, aiokafka and kafkajs members join, get the partitions of a 6-partition topic
split between them, rebalance when a member leaves, keep a static member's place across its
restart, and carry on when the coordinator's broker is killed -9 (the group's metadata is
loaded from ``__consumer_offsets`` by the partition's new leader)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from kmeta.testing import Cluster

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer

pytestmark = pytest.mark.e2e

TOPIC = "orders"
PARTITIONS = 6
JS = Path(__file__).parent / "js"
#: how long a group may take to settle (a join, the 200 ms initial delay, a sync)
SETTLE_S = 60.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(1, offsets_topic_num_partitions=5, group_initial_rebalance_delay_ms=200) as c:
        c.create_topic(TOPIC, PARTITIONS, 1)
        yield c


def consumer(cluster: Cluster, group: str, topic: str = TOPIC, extra: dict[str, Any] | None = None) -> tuple[Consumer, list[list[int]]]:
    """A confluent-kafka member subscribed to ``topic``; the list gets each assignment it is
    given. It starts from its group's committed offsets (the earliest without)."""
    assignments: list[list[int]] = []
    c = Consumer({
        **cluster.client_config(), "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
        **(extra or {}),
    })  # fmt: skip
    c.subscribe([topic], on_assign=lambda _c, parts: assignments.append(sorted(p.partition for p in parts)))
    return c, assignments


def settle(members: list[tuple[Consumer, list[list[int]]]], until: Callable[[], bool]) -> None:
    """Poll every member (their callbacks run in poll) until ``until()``."""
    deadline = time.monotonic() + SETTLE_S
    while not until():
        assert time.monotonic() < deadline, [a for _, a in members]
        for c, _ in members:
            c.poll(0.05)


def current(members: list[tuple[Consumer, list[list[int]]]]) -> list[list[int]]:
    return [sorted(p.partition for p in c.assignment()) for c, _ in members]


def split(assignments: list[list[int]], sizes: list[int]) -> bool:
    """Every partition once, in shares of ``sizes`` (in any order)."""
    flat = sorted(p for a in assignments for p in a)
    return flat == list(range(PARTITIONS)) and sorted(len(a) for a in assignments) == sorted(sizes)


def describe(cluster: Cluster, group: str) -> Any:
    settings: dict[str, Any] = {**cluster.client_config()}
    admin = AdminClient(settings)
    return admin.describe_consumer_groups([group])[group].result(30)


def produce(cluster: Cluster, topic: str, values: list[bytes]) -> None:
    producer = Producer({**cluster.client_config(), "acks": "all", "linger.ms": 2})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def consume(members: list[tuple[Consumer, list[list[int]]]], seen: Counter[bytes], until: Callable[[], bool]) -> None:
    """Poll every member; each record it gets is counted and its offset committed before the
    next poll (so a rebalance hands its partition on from exactly there)."""
    deadline = time.monotonic() + SETTLE_S
    while not until():
        assert time.monotonic() < deadline, (len(seen), [a for _, a in members])
        for c, _ in members:
            for message in c.consume(50, 0.05):
                assert message.error() is None, message.error()
                seen[message.value() or b""] += 1
                c.commit(message=message, asynchronous=False)


def test_three_confluent_members_consume_every_record_once_across_one_leaving(cluster: Cluster) -> None:
    cluster.create_topic("once", PARTITIONS, 1)
    members = [consumer(cluster, "three", "once") for _ in range(3)]
    settle(members, lambda: split(current(members), [2, 2, 2]))
    described = describe(cluster, "three")
    assert str(described.state).endswith("STABLE")
    assert len(described.members) == 3
    seen: Counter[bytes] = Counter()
    first = [b"a-%d" % i for i in range(300)]
    produce(cluster, "once", first)
    consume(members, seen, lambda: len(seen) == len(first))
    leaving = members.pop(0)
    leaving[0].close()  # LeaveGroup
    settle(members, lambda: split(current(members), [3, 3]))
    assert len(describe(cluster, "three").members) == 2
    second = [b"b-%d" % i for i in range(300)]
    produce(cluster, "once", second)
    consume(members, seen, lambda: len(seen) == len(first) + len(second))
    for c, _ in members:
        c.consume(50, 0.5)  # (nothing more comes)
    assert set(seen) == set(first + second)
    assert set(seen.values()) == {1}
    for c, _ in members:
        c.close()
    deadline = time.monotonic() + SETTLE_S
    while not str(describe(cluster, "three").state).endswith("EMPTY"):
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_a_static_member_restarts_without_a_rebalance(cluster: Cluster) -> None:
    stay = consumer(cluster, "static", extra={"group.instance.id": "stay"})
    back = consumer(cluster, "static", extra={"group.instance.id": "back"})
    settle([stay, back], lambda: split(current([stay, back]), [3, 3]))
    before = describe(cluster, "static")
    # (stay may have had a generation alone before back joined: count from the split)
    stay_assignments = len(stay[1])
    given = sorted(current([back])[0])
    back[0].close()  # (a static member sends no LeaveGroup: its place waits a session)
    again = consumer(cluster, "static", extra={"group.instance.id": "back"})
    settle([stay, again], lambda: current([again])[0] == given)
    after = describe(cluster, "static")
    assert len(after.members) == 2
    assert {m.group_instance_id for m in after.members} == {"stay", "back"}
    assert {m.member_id for m in after.members} != {m.member_id for m in before.members}
    assert len(stay[1]) == stay_assignments  # the other member was never reassigned: no rebalance
    for c, _ in (stay, again):
        c.close()


def test_kafka_python_consumer_group(cluster: Cluster) -> None:
    producer = Producer({**cluster.client_config(), "acks": "all"})
    for i in range(60):
        producer.produce(TOPIC, b"kp-%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    kc = KafkaConsumer(
        TOPIC, group_id="kafka-python", enable_auto_commit=False, auto_offset_reset="earliest",
        session_timeout_ms=6000, heartbeat_interval_ms=300, **cluster.client_config(kafka_python=True),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + SETTLE_S
        seen: set[bytes] = set()
        while not {b"kp-%d" % i for i in range(60)} <= seen:
            assert time.monotonic() < deadline, len(seen)
            for records in kc.poll(timeout_ms=200).values():
                seen.update(r.value for r in records)
        assert sorted(p.partition for p in kc.assignment()) == list(range(PARTITIONS))
    finally:
        kc.close()


def test_aiokafka_members_share_the_topic(cluster: Cluster) -> None:
    from aiokafka import AIOKafkaConsumer

    async def run() -> list[list[int]]:
        members = [
            AIOKafkaConsumer(
                TOPIC, bootstrap_servers=cluster.bootstrap_servers, group_id="aiokafka",
                enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=6000,
                heartbeat_interval_ms=300,
            )
            for _ in range(2)
        ]
        for m in members:
            await m.start()
        try:
            deadline = time.monotonic() + SETTLE_S
            while True:
                got = [sorted(p.partition for p in m.assignment()) for m in members]
                if split(got, [3, 3]):
                    return got
                assert time.monotonic() < deadline, got
                await asyncio.sleep(0.1)
        finally:
            for m in members:
                await m.stop()

    assert split(asyncio.run(run()), [3, 3])


def test_kafkajs_members_share_the_topic(cluster: Cluster) -> None:
    assert (JS / "node_modules" / "kafkajs").is_dir(), "kafkajs is not installed: `make js-clients`"
    args = {"brokers": cluster.bootstrap_servers, "topic": TOPIC, "group": "kafkajs", "members": 2}
    done = subprocess.run(
        ["node", "group.js", json.dumps(args)], cwd=JS, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert split(out["assignments"], [3, 3])


def test_the_group_carries_on_after_its_coordinator_is_killed() -> None:
    with Cluster(3, offsets_topic_num_partitions=3, group_initial_rebalance_delay_ms=200) as cluster:
        cluster.create_topic(TOPIC, PARTITIONS, 3)
        # (sessions longer than the controller's fencing of the dead broker and the election:
        # librdkafka also leaves on its own after a session without a heartbeat answered)
        members = [consumer(cluster, "survivor", extra={"session.timeout.ms": 30000}) for _ in range(2)]
        settle(members, lambda: split(current(members), [3, 3]))
        before = describe(cluster, "survivor")
        coordinator = before.coordinator.id
        cluster.kill_broker(coordinator)
        # the members heartbeat the new leader of the group's partition, which loaded the group
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
        assert split(current(members), [3, 3])
        for c, _ in members:
            c.close()


def test_kafka_python_admin_lists_describes_removes_members_and_deletes(cluster: Cluster) -> None:
    """kafka-consumer-groups.sh's paths through kafka-python's admin client: ListGroups with a
    states filter, DescribeGroups, LeaveGroup v3+ by instance id (a closed static member sends
    no LeaveGroup and keeps its place), DeleteGroups refused while members remain."""
    from kafka.admin import KafkaAdminClient, MemberToRemove

    members = [consumer(cluster, "managed", extra={"group.instance.id": f"i{i}"}) for i in range(2)]
    settle(members, lambda: split(current(members), [3, 3]))
    admin = KafkaAdminClient(**cluster.client_config(kafka_python=True))
    try:
        listed = admin.list_groups(states_filter=["stable"])
        assert {(g["group_id"], g["group_state"], g["group_type"]) for g in listed} >= {("managed", "Stable", "classic")}
        (described,) = admin.describe_groups(["managed"]).values()
        assert (described["group_state"], described["protocol_data"]) == ("Stable", "range")
        assert sorted(m["group_instance_id"] for m in described["members"]) == ["i0", "i1"]
        assignments = [p for m in described["members"] for a in m["member_assignment"]["assigned_partitions"] for p in a["partitions"]]
        assert sorted(assignments) == list(range(PARTITIONS))
        members[0][0].close()  # (static: its place waits for its session)
        assert admin.delete_groups(["managed"]) == {"managed": "NonEmptyGroupError"}
        removed = admin.remove_group_members("managed", [MemberToRemove(group_instance_id="i0")])
        assert list(removed) == ["i0"]
        settle(members[1:], lambda: current(members[1:]) == [list(range(PARTITIONS))])
        members[1][0].close()
        admin.remove_group_members("managed", [MemberToRemove(group_instance_id="i1")])
        assert admin.delete_groups(["managed"]) == {"managed": "OK"}
        assert "managed" not in {g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()
