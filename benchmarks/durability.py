"""Durability under leader crashes: acks=all records survive kill -9 of the leader (issue 29).

    .venv/bin/python benchmarks/durability.py [--rounds 30] [--round-s 1.0] [--brokers 3]

A real producer (confluent-kafka, acks=all, idempotence off, one request in flight so a retry
cannot reorder) sends numbered records to one partition of a topic with replication factor 3
and min.insync.replicas 2, as fast as the round trips allow, while each round kill -9s the
partition's current leader and starts it again (its state dir says the old process is gone:
the controller fails it at once and elects a leader from the ISR). Afterwards a consumer reads
the partition from its log start to its high watermark and the script reports:

* ``acknowledged``: records the producer was told were written;
* ``consumed``: records read back (``unique`` of them distinct);
* ``lost``: acknowledged records never read back (must be 0);
* ``duplicated``: records read more than once (a retried batch the first leader had written
  before it died: idempotence, which would drop them, comes later);
* ``out_of_order``: acknowledged records read back after a higher-numbered one (a retry
  re-appends only unacknowledged batches, so this must be 0 for the acknowledged ones).

``tests/e2e/test_replication.py`` runs the same rounds briefly. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import itertools
import json
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kmeta.testing import Cluster

TOPIC = "durable"


@dataclass
class Report:
    rounds: int
    acknowledged: int
    consumed: int
    unique: int
    lost: int
    duplicated: int
    out_of_order: int
    failed_deliveries: int
    seconds: float
    leaders: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Stream:
    """A producer thread sending numbered records until stopped; what was acknowledged."""

    def __init__(self, cluster: Cluster, topic: str) -> None:
        self.producer = Producer({
            **cluster.client_config(), "acks": "all", "enable.idempotence": False,
            "max.in.flight.requests.per.connection": 1, "linger.ms": 2, "retries": 1_000_000,
            "retry.backoff.ms": 50, "message.timeout.ms": 120_000, "request.timeout.ms": 5_000,
            "topic.metadata.refresh.interval.ms": 500,
        })  # fmt: skip
        self.topic = topic
        self.acknowledged: list[int] = []
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err: object, message: Any) -> None:
        if err is None:
            self.acknowledged.append(int(message.value()))
        else:
            self.failed += 1

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            try:
                self.producer.produce(self.topic, b"%d" % n, partition=0, on_delivery=self._delivered)
                n += 1
            except BufferError:
                pass
            except KafkaException as exc:
                # (the producer's metadata does not show partition 0 yet, e.g. a first answer
                # from a broker the new topic has not reached: librdkafka refuses at once)
                if exc.args[0].code() != KafkaError._UNKNOWN_PARTITION:
                    raise
            self.producer.poll(0.002)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.producer.flush(120)


def leader_of(cluster: Cluster, topic: str, among: list[int]) -> int:
    for broker in among:
        try:
            return cluster.metadata(broker).leader(topic, 0)
        except Exception:  # (a broker restarting: ask the next)
            continue
    return -1


def await_new_leader(cluster: Cluster, topic: str, old: int, timeout_s: float = 20.0) -> int:
    """The partition's leader once every live broker but ``old`` names another live one."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        live = [b for b in cluster.live_brokers if b != old]
        leader = leader_of(cluster, topic, live)
        if leader not in (-1, old) and leader in live:
            return leader
        time.sleep(0.05)
    raise TimeoutError(f"no leader of {topic}-0 but {old} after {timeout_s} s")


def consume_all(cluster: Cluster, topic: str, timeout_s: float = 30.0) -> list[int]:
    """Every record of partition 0 from its log start to its high watermark, in order."""
    consumer = Consumer({**cluster.client_config(), "group.id": "durability", "enable.auto.commit": False})
    try:
        tp = TopicPartition(topic, 0)
        _, high = consumer.get_watermark_offsets(tp, timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[int] = []
        position = 0
        deadline = time.monotonic() + timeout_s
        while position < high and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                if m.error() is None:
                    got.append(int(m.value()))
                    position = m.offset() + 1
        return got
    finally:
        consumer.close()


def run_rounds(cluster: Cluster, rounds: int, round_s: float, topic: str = TOPIC) -> Report:
    """``rounds`` kill -9s of the leader under a producer stream, each followed by a restart
    and ``round_s`` of producing; then everything read back and counted."""
    cluster.create_topic(topic, 1, 3, configs={"min.insync.replicas": "2"})
    stream = Stream(cluster, topic)
    started = time.monotonic()
    stream.start()
    leaders: list[int] = []
    try:
        time.sleep(round_s)
        for _ in range(rounds):
            leader = leader_of(cluster, topic, cluster.live_brokers)
            leaders.append(leader)
            cluster.kill_broker(leader)
            cluster.start_broker(leader)
            await_new_leader(cluster, topic, leader)
            time.sleep(round_s)
    finally:
        stream.stop()
    consumed = consume_all(cluster, topic)
    acked = stream.acknowledged
    seen = set(consumed)
    at: dict[int, int] = {}
    for i, value in enumerate(consumed):
        at.setdefault(value, i)
    order = [at[v] for v in sorted(acked) if v in at]
    return Report(
        rounds=rounds, acknowledged=len(acked), consumed=len(consumed), unique=len(seen),
        lost=len(set(acked) - seen), duplicated=len(consumed) - len(seen),
        out_of_order=sum(1 for a, b in itertools.pairwise(order) if b < a),
        failed_deliveries=stream.failed, seconds=round(time.monotonic() - started, 1),
        leaders=leaders,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--round-s", type=float, default=1.0)
    parser.add_argument("--brokers", type=int, default=3)
    args = parser.parse_args()
    with Cluster(args.brokers, log_level="WARNING") as cluster:
        report = run_rounds(cluster, args.rounds, args.round_s)
    print(json.dumps(report.as_dict(), indent=2))


if __name__ == "__main__":
    main()
