"""Replication with real processes and a real client (issue 29): followers fetch from their
leader, acks=all waits for the ISR, and no acknowledged record is lost when the leader is
killed -9 under a producer stream (benchmarks/durability.py runs the same rounds longer)."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Producer

from benchmarks.durability import consume_all, run_rounds
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import list_offsets as lo
from kmeta.testing import Cluster

pytestmark = pytest.mark.e2e


async def _log_end(address: tuple[str, int], topic: str) -> int:
    """The broker's own log end of ``topic``-0 (ListOffsets latest as Kafka's debugging
    replica id -2, which a follower answers too)."""
    conn = await KafkaConnection.open(*address)
    try:
        request = lo.ListOffsetsRequest(
            version=4, replica_id=-2, topics=(lo.ListOffsetsTopic(topic, (lo.ListOffsetsPartition(0, -1, -1),)),)
        )
        [topic_answer] = (await conn.request(request, 10)).topics
        [answer] = topic_answer.partitions
        assert answer.error_code == 0
        return int(answer.offset)
    finally:
        conn.close()


def _log_ends(cluster: Cluster, topic: str, want: int, timeout_s: float = 10.0) -> dict[int, int]:
    """Each broker's log end, once all reach ``want`` (or the time is up)."""
    deadline = time.monotonic() + timeout_s
    while True:
        ends = {b: asyncio.run(_log_end(cluster.address(b), topic)) for b in cluster.broker_ids}
        if all(e == want for e in ends.values()) or time.monotonic() > deadline:
            return ends
        time.sleep(0.1)


def test_acks_all_records_reach_every_replica_and_a_restarted_follower_catches_up() -> None:
    with Cluster(3) as cluster:
        cluster.create_topic("r3", 1, 3, configs={"min.insync.replicas": "2"})
        producer = Producer({**cluster.client_config(), "acks": "all", "linger.ms": 2})
        delivered: list[int] = []

        def report(err: object, message: object) -> None:
            assert err is None, err
            delivered.append(message.offset())  # type: ignore[attr-defined]

        for i in range(500):
            producer.produce("r3", b"%d" % i, partition=0, on_delivery=report)
        assert producer.flush(30) == 0
        assert sorted(delivered) == list(range(500))
        assert _log_ends(cluster, "r3", 500) == {1: 500, 2: 500, 3: 500}
        leader = cluster.metadata(1).leader("r3", 0)
        follower = next(b for b in cluster.broker_ids if b != leader)
        cluster.kill_broker(follower)
        for i in range(500, 800):
            producer.produce("r3", b"%d" % i, partition=0, on_delivery=report)
        assert producer.flush(30) == 0  # (the ISR still holds two replicas: min.insync.replicas)
        cluster.start_broker(follower)  # its log dir holds 500 records: it fetches from there
        assert _log_ends(cluster, "r3", 800) == {1: 800, 2: 800, 3: 800}
        assert consume_all(cluster, "r3") == list(range(800))


def test_no_acknowledged_record_is_lost_when_the_leader_is_killed_in_rounds() -> None:
    """10 rounds of kill -9 of the partition's leader under an acks=all stream (RF 3,
    min.insync.replicas 2), each restarted at once. Duplicates are counted, not refused: a
    batch the dead leader had written is sent again (idempotence comes later)."""
    with Cluster(3, log_level="WARNING") as cluster:
        report = run_rounds(cluster, rounds=10, round_s=0.2)
    print(f"durability: {report.as_dict()}")
    assert report.acknowledged > 0
    assert report.failed_deliveries == 0
    assert report.lost == 0, report
    assert report.out_of_order == 0, report
    assert report.unique >= report.acknowledged

