"""Issue 31, point 8, as one scenario: a three-member confluent-kafka group on a 6-partition
topic while a producer runs, across a member leaving, partitions added (6 -> 9), and the
group coordinator's broker killed -9 (3 brokers: ``__consumer_offsets`` and the topic have
replication factor 3, so the partition's new leader loads the group and its offsets).

What "every record consumed once per group" means here (:class:`Ledger`). Each member, in
turn, takes what ``consume()`` hands it, processes it, then commits (sync) the next offset of
each partition it took records from. Records are identified by (partition, offset) — the
producer's delivery reports say which records exist. Then:

* **nothing lost**: every record whose delivery was acknowledged is processed at least once;
* **redelivery only above the commit**: a record is processed again only if no successful
  commit covered it yet (its offset >= the partition's last committed offset when it came
  again) — at-least-once allows that much after a rebalance or a failed commit, no more. A
  record behind a successful commit coming back means the group lost a commit.

(The members run in this one process and are polled in turn, so the ledger sees every
processing and every commit in one order.) :func:`test_the_ledger_catches_a_lost_record_and_a_lost_commit`
shows the check fails on both kinds of fault.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kmeta.testing import Cluster

pytestmark = pytest.mark.e2e

TOPIC = "stream"
#: a phase's bound: a refresh, a rebalance, a coordinator moving (a broker's fencing included)
PHASE_S = 90.0


class Ledger:
    """Processings and successful commits in the one order they happened; see the module."""

    def __init__(self) -> None:
        self.processed: dict[tuple[int, int], int] = {}
        self.committed: dict[int, int] = {}
        self.violations: list[str] = []
        self.redelivered = 0

    def process(self, partition: int, offset: int) -> None:
        times = self.processed.get((partition, offset), 0)
        if times:
            self.redelivered += 1
            if offset < self.committed.get(partition, 0):
                self.violations.append(
                    f"{partition}@{offset} again behind the commit at {self.committed[partition]}"
                )
        self.processed[(partition, offset)] = times + 1

    def commit(self, partition: int, next_offset: int) -> None:
        self.committed[partition] = next_offset

    def problems(self, delivered: set[tuple[int, int]]) -> list[str]:
        lost = sorted(delivered - set(self.processed))
        return (
            self.violations
            + [f"lost {p}@{o}" for p, o in lost[:20]]
            + ([f"... {len(lost)} lost"] if len(lost) > 20 else [])
        )


def test_the_ledger_catches_a_lost_record_and_a_lost_commit() -> None:
    fine = Ledger()
    for offset in range(3):
        fine.process(0, offset)
    fine.commit(0, 2)
    fine.process(0, 2)  # (processed, not committed: at-least-once may repeat it)
    assert fine.problems({(0, 0), (0, 1), (0, 2)}) == []
    assert fine.redelivered == 1
    lost = Ledger()
    lost.process(0, 0)
    lost.process(0, 2)
    assert lost.problems({(0, 0), (0, 1), (0, 2)}) == ["lost 0@1"]
    behind = Ledger()
    behind.process(1, 0)
    behind.process(1, 1)
    behind.commit(1, 2)
    behind.process(1, 1)  # handed out again although committed past
    assert behind.problems({(1, 0), (1, 1)}) == ["1@1 again behind the commit at 2"]


class Feed:
    """A producer thread writing numbered records round the topic's partitions until stopped;
    ``delivered`` holds (partition, offset) of every acknowledged record."""

    def __init__(self, cluster: Cluster) -> None:
        self.producer = Producer({
            **cluster.client_config(), "acks": "all", "linger.ms": 5, "enable.idempotence": True,
            "topic.metadata.refresh.interval.ms": 1000,
        })  # fmt: skip
        self.partitions = 6
        self.delivered: set[tuple[int, int]] = set()
        self.failed: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _report(self, err: Any, msg: Any) -> None:
        if err is None:
            self.delivered.add((msg.partition(), msg.offset()))
        else:
            self.failed.append(str(err))

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(
                    TOPIC, b"r-%d" % i, partition=i % self.partitions, on_delivery=self._report
                )
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.005)

    def grow(self, partitions: int) -> None:
        """Write to ``partitions`` once this producer's metadata shows them."""
        deadline = time.monotonic() + PHASE_S
        while (
            len(self.producer.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions) < partitions
        ):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        self.partitions = partitions

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert self.producer.flush(60) == 0
        del self.producer  # (destroyed now, not after the cluster it would keep calling)


class Group:
    """The group's members, polled in turn; each processes and then commits (see the module)."""

    def __init__(self, cluster: Cluster, ledger: Ledger) -> None:
        self.cluster = cluster
        self.ledger = ledger
        self.members: list[Consumer] = []
        self.commit_errors: list[str] = []

    def join(self) -> None:
        consumer = Consumer({
            **self.cluster.client_config(), "group.id": "once", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "heartbeat.interval.ms": 300,
            "topic.metadata.refresh.interval.ms": 1000,
            # longer than the dead broker's fencing and the election that moves the coordinator
            "session.timeout.ms": 30000,
        })  # fmt: skip
        consumer.subscribe([TOPIC])
        self.members.append(consumer)

    def leave(self) -> None:
        self.members.pop(0).close()  # LeaveGroup

    def round(self) -> None:
        for consumer in self.members:
            taken: dict[int, int] = {}
            for message in consumer.consume(100, 0.05):
                if message.error() is not None:
                    assert message.error().code() in (
                        KafkaError._TRANSPORT,
                        KafkaError._ALL_BROKERS_DOWN,
                    ), message.error()
                    continue
                self.ledger.process(message.partition(), message.offset())
                taken[message.partition()] = message.offset() + 1
            if not taken:
                continue
            try:
                consumer.commit(
                    offsets=[TopicPartition(TOPIC, p, o) for p, o in taken.items()],
                    asynchronous=False,
                )
            except KafkaException as exc:  # (a rebalance or the coordinator moving: not committed)
                self.commit_errors.append(str(exc))
                continue
            for partition, next_offset in taken.items():
                self.ledger.commit(partition, next_offset)

    def assignment(self) -> list[list[int]]:
        return [sorted(tp.partition for tp in c.assignment()) for c in self.members]

    def run_until(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + PHASE_S
        while not done():
            assert time.monotonic() < deadline, (what, self.assignment(), self.commit_errors[-3:])
            self.round()


def split(assignment: list[list[int]], partitions: int) -> bool:
    flat = sorted(p for a in assignment for p in a)
    return flat == list(range(partitions)) and all(assignment)


def coordinator(cluster: Cluster) -> int:
    admin = AdminClient(cluster.client_config())
    return int(admin.describe_consumer_groups(["once"])["once"].result(30).coordinator.id)


def test_three_members_consume_every_record_once_across_a_leave_a_partition_add_and_a_coordinator_kill() -> (
    None
):
    with Cluster(
        3, offsets_topic_num_partitions=3, group_initial_rebalance_delay_ms=200
    ) as cluster:
        cluster.create_topic(TOPIC, 6, 3)
        ledger = Ledger()
        group = Group(cluster, ledger)
        for _ in range(3):
            group.join()
        feed = Feed(cluster)

        def caught_up(more: int) -> Callable[[], bool]:
            """``more`` records acknowledged from now on, and then every record acknowledged
            by then processed."""
            target, mark = len(feed.delivered) + more, set[tuple[int, int]]()

            def done() -> bool:
                if not mark:
                    if len(feed.delivered) < max(target, 1):
                        return False
                    mark.update(feed.delivered)
                return mark <= ledger.processed.keys()

            return done

        group.run_until(
            lambda: split(group.assignment(), 6) and len(group.members) == 3, "three members"
        )
        group.run_until(caught_up(300), "consuming with three")
        group.leave()
        group.run_until(lambda: split(group.assignment(), 6), "two members after one left")
        group.run_until(caught_up(300), "consuming after the leave")
        cluster.add_partitions(TOPIC, 9)
        feed.grow(9)
        group.run_until(lambda: split(group.assignment(), 9), "the added partitions assigned")
        group.run_until(
            lambda: {6, 7, 8} <= {p for p, _ in ledger.processed}, "records of the added partitions"
        )
        dead = coordinator(cluster)
        cluster.kill_broker(dead)
        group.run_until(Moved(cluster, dead), "the coordinator moving")
        group.run_until(caught_up(300), "consuming after the coordinator's kill")
        feed.finish()
        group.run_until(caught_up(0), "the rest")
        committed = group.members[0].committed(
            [TopicPartition(TOPIC, p) for p in range(9)], timeout=30
        )
        for consumer in group.members:
            consumer.close()
        assert ledger.problems(feed.delivered) == []
        # the offsets committed survived the kill: the new coordinator's are those the ledger
        # saw acknowledged (or later ones, whose answer the kill lost), never beyond what was
        # processed
        got = {tp.partition: tp.offset for tp in committed}
        assert got.keys() == ledger.committed.keys() == set(range(9))
        ends = {p: 1 + max(o for q, o in ledger.processed if q == p) for p in range(9)}
        assert all(ledger.committed[p] <= got[p] <= ends[p] for p in range(9)), (
            got,
            ledger.committed,
        )
        assert len(feed.delivered) > 1200


class Moved:
    """Whether the group's coordinator is another broker than ``dead`` (asked once a second:
    the members keep being polled meanwhile)."""

    def __init__(self, cluster: Cluster, dead: int) -> None:
        self.cluster, self.dead, self.next = cluster, dead, 0.0

    def __call__(self) -> bool:
        if time.monotonic() < self.next:
            return False
        self.next = time.monotonic() + 1.0
        try:
            return coordinator(self.cluster) != self.dead
        except KafkaException:  # (no coordinator at this instant: ask again)
            return False
