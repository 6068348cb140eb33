"""The once-per-group scenario of :mod:`tests.e2e.test_group_once` with three kafka-python
members: a 6-partition topic (replication factor 3 on 3 brokers) while a producer runs, across
a member leaving, partitions added (6 -> 9) and the group coordinator's broker killed -9; every
acknowledged record processed, none again behind a successful commit.

Each member runs in its own thread, polling without pause, as kafka-python is meant to be used.
Polling three kafka-python consumers in turn from one thread does not settle with any broker
that answers as Kafka does: kafka-python 3.0.12 drops a JoinGroup/SyncGroup round that finishes
while its poll() is not running (docs/groups.md, "Known client issues"), and a dropped round of
the leader is a new rebalance.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer

from kmeta.testing import Cluster
from tests.e2e.test_group_metadata_rebalances import JOIN_POLL_MS
from tests.e2e.test_group_once import Ledger, Moved, coordinator, split

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.errors import CommitFailedError, RebalanceInProgressError

pytestmark = pytest.mark.e2e

TOPIC = "stream"
#: a phase's bound: a rebalance of three members (session and join delays are short here)
PHASE_S = 20.0


class Member:
    """A kafka-python consumer in its own thread: poll, process, commit (sync), again."""

    def __init__(self, cluster: Cluster, ledger: Ledger, lock: threading.Lock, name: str) -> None:
        self.cluster, self.ledger, self.lock = cluster, ledger, lock
        self.consumer = KafkaConsumer(
            TOPIC, group_id="once", client_id=name, enable_auto_commit=False,
            auto_offset_reset="earliest", heartbeat_interval_ms=300, session_timeout_ms=10000,
            metadata_max_age_ms=1000,  # (to see the added partitions soon)
            **cluster.client_config(kafka_python=True),
        )  # fmt: skip
        self.assigned: list[int] = []
        self.commit_errors: list[str] = []
        self.failure: BaseException | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                self._round()
        except BaseException as exc:  # (reported by the test, not lost with the thread)
            self.failure = exc
        finally:
            self.consumer.close()  # LeaveGroup

    def _round(self) -> None:
        # (a long poll: the partitions added make the leader rejoin, and kafka-python drops a
        # leader's metadata-started round that outlives one poll(): see JOIN_POLL_MS)
        batches = self.consumer.poll(timeout_ms=JOIN_POLL_MS, max_records=100)
        self.assigned = sorted(tp.partition for tp in self.consumer.assignment())
        taken: dict[int, int] = {}
        with self.lock:
            for records in batches.values():
                for record in records:
                    self.ledger.process(record.partition, record.offset)
                    taken[record.partition] = record.offset + 1
        if not taken:
            return
        try:
            self.consumer.commit({
                TopicPartition(TOPIC, p): OffsetAndMetadata(o, "", -1) for p, o in taken.items()
            })  # fmt: skip
        except (CommitFailedError, RebalanceInProgressError) as exc:  # (not committed)
            self.commit_errors.append(repr(exc))
            return
        with self.lock:
            for partition, next_offset in taken.items():
                self.ledger.commit(partition, next_offset)

    def leave(self) -> None:
        self.halt()
        assert not self.thread.is_alive()
        assert self.failure is None, self.failure

    def halt(self) -> None:
        """Stop polling and close (also when the test failed: a consumer left running in the
        worker goes on calling the random module, which Hypothesis takes for a strategy's)."""
        self.stop.set()
        self.thread.join(30)


class Feed:
    """Numbered records round the topic's partitions, each batch acknowledged (acks=all) before
    the next; ``delivered`` holds (partition, offset) of every one."""

    def __init__(self, cluster: Cluster) -> None:
        self.producer = Producer({
            **cluster.client_config(), "acks": "all", "linger.ms": 5,
            "topic.metadata.refresh.interval.ms": 1000,
        })  # fmt: skip
        self.delivered: set[tuple[int, int]] = set()
        self.sent = 0
        self.partitions = 6

    def _report(self, err: Any, msg: Any) -> None:
        assert err is None, err
        self.delivered.add((msg.partition(), msg.offset()))

    def produce(self, n: int) -> None:
        for _ in range(n):
            self.producer.produce(
                TOPIC,
                b"r-%d" % self.sent,
                partition=self.sent % self.partitions,
                on_delivery=self._report,
            )
            self.sent += 1
        assert self.producer.flush(30) == 0

    def grow(self, partitions: int) -> None:
        """Write to ``partitions`` once this producer's metadata shows them."""
        deadline = time.monotonic() + PHASE_S
        while (
            len(self.producer.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions) < partitions
        ):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        self.partitions = partitions


def test_three_kafka_python_members_consume_every_record_once_across_a_leave_a_partition_add_and_a_coordinator_kill() -> (
    None
):
    with Cluster(
        3, offsets_topic_num_partitions=3, group_initial_rebalance_delay_ms=200
    ) as cluster:
        cluster.create_topic(TOPIC, 6, 3)
        ledger, lock = Ledger(), threading.Lock()
        feed = Feed(cluster)
        members = [Member(cluster, ledger, lock, f"m{i}") for i in range(3)]

        def wait_until(done: Callable[[], bool], what: str) -> None:
            deadline = time.monotonic() + PHASE_S
            while not done():
                failures = [m.failure for m in members if m.failure is not None]
                assert not failures, failures
                assert time.monotonic() < deadline, (what, [m.assigned for m in members])
                feed.produce(20)  # (the producer runs on while the group settles)
                time.sleep(0.1)

        def consumed() -> bool:
            with lock:
                return feed.delivered <= ledger.processed.keys()

        everyone = list(members)
        try:
            wait_until(lambda: split([m.assigned for m in members], 6), "three members")
            feed.produce(300)
            wait_until(consumed, "consuming with three")
            members.pop(0).leave()
            wait_until(lambda: split([m.assigned for m in members], 6), "two members after one left")
            feed.produce(300)
            wait_until(consumed, "consuming after the leave")
            cluster.add_partitions(TOPIC, 9)
            feed.grow(9)
            wait_until(lambda: split([m.assigned for m in members], 9), "the added partitions assigned")
            feed.produce(300)
            wait_until(consumed, "consuming the added partitions")
            dead = coordinator(cluster)
            cluster.kill_broker(dead)
            wait_until(Moved(cluster, dead), "the coordinator moving")
            feed.produce(300)
            wait_until(consumed, "consuming after the coordinator's kill")
            for member in members:
                member.leave()
        finally:
            for member in everyone:
                member.halt()
        assert ledger.problems(feed.delivered) == []
        assert len(feed.delivered) >= 1200
        assert {p for p, _ in ledger.processed} == set(range(9))
        del feed.producer  # (destroyed now, not after the cluster it would keep calling)
