"""Replication with real processes and a real client (issue 29): followers fetch from their
leader, acks=all waits for the ISR, and no acknowledged record is lost when the leader is
killed -9 under a producer stream (benchmarks/durability.py runs the same rounds longer)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import pytest
from confluent_kafka import Producer

from benchmarks.durability import Stream, consume_all, run_rounds
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import list_offsets as lo
from kmeta.testing import Cluster
from tests.helpers import ProxyProcess, wait

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


def _await_isr(cluster: Cluster, topic: str, want: list[int], timeout_s: float, *, asking: int) -> float:
    """Seconds until broker ``asking``'s Metadata answer (a client's request) shows ``want``
    as the partition's ISR. (Asked of one broker that hears from the controller throughout:
    a client library may ask the cut or stopped one, whose view is as old as the cut. A topic
    just created without the propagation barrier may not be there yet: no ISR until it is.)"""
    started = time.monotonic()
    while (isr := _isr(cluster, topic, asking)) != want:
        assert time.monotonic() - started < timeout_s, (
            f"ISR {isr}, not {want}, after {timeout_s} s; the ISR's log lines:\n{_isr_lines(cluster)}"
        )
        time.sleep(0.1)
    return time.monotonic() - started


def _isr(cluster: Cluster, topic: str, asking: int) -> list[int] | None:
    """Partition 0's ISR in broker ``asking``'s Metadata answer; None while it lacks the topic."""
    partitions = cluster.metadata(asking).topics.get(topic)
    return None if partitions is None or 0 not in partitions else sorted(partitions[0].isr)


def _isr_lines(cluster: Cluster) -> str:
    """What the daemons logged of ISR changes (a failure's evidence: their dir goes with it)."""
    assert cluster.data_dir is not None
    lines = [
        f"{log.stem}: {line}"
        for log in sorted((cluster.data_dir / "logs").glob("*.log"))
        for line in log.read_text(errors="replace").splitlines()
        if "ISR" in line or "AlterPartition" in line or "fenc" in line
    ]
    return "\n".join(lines[-40:])


def _isr_changes(cluster: Cluster, broker: int, topic: str) -> list[tuple[str, list[int], list[int], int]]:
    """The ``isr_change`` lines of ``broker``'s state-change log for ``topic``: (name, ISR,
    new ISR, error)."""
    assert cluster.data_dir is not None
    lines = (cluster.data_dir / f"broker-{broker}.state-change.log").read_text().splitlines()
    return [
        (e["name"], sorted(e["isr"]), sorted(e["new_isr"]), e["error_code"])
        for e in map(json.loads, lines)
        if e["event"] == "isr_change" and e["topic"] == topic
    ]


def test_a_stopped_follower_leaves_the_isr_and_rejoins_after_sigcont() -> None:
    """SIGSTOP a follower for longer than replica.lag.time.max.ms (1.5 s here; its controller
    session, 40 s, does not expire meanwhile): its leader drops it from the ISR by
    AlterPartition, acks=all goes on with the other two (min.insync.replicas 2); SIGCONT: it
    catches up and rejoins. (The session is long so that only the leader can have shrunk the
    ISR within the waits below, which a loaded box stretches: CI once saw 10 s pass.)"""
    with Cluster(3, session_timeout_ms=40_000, replica_lag_time_max_ms=1_500) as cluster:
        cluster.create_topic("lag", 1, 3, configs={"min.insync.replicas": "2"})
        stream = Stream(cluster, "lag")
        stream.start()
        stopped: int | None = None
        try:
            _await_isr(cluster, "lag", [1, 2, 3], 10, asking=1)
            # the stream under way first: a producer still asking for its first Metadata may
            # ask the follower about to stop and wait out its socket timeout, and with nothing
            # appended a follower at the log end stays in sync (as in Kafka)
            wait(lambda: stream.acknowledged, 20, "the stream's first acknowledgement")
            leader = cluster.metadata(1).leader("lag", 0)
            stopped = next(b for b in cluster.broker_ids if b != leader)
            asking = leader
            pid = cluster.pid(f"broker-{stopped}")
            assert pid is not None
            os.kill(pid, signal.SIGSTOP)
            left = _await_isr(cluster, "lag", sorted(set(cluster.broker_ids) - {stopped}), 25, asking=asking)
            acked = len(stream.acknowledged)
            time.sleep(0.5)
            assert len(stream.acknowledged) > acked  # (acks=all with the two left)
            os.kill(pid, signal.SIGCONT)
            stopped_id, stopped = stopped, None
            rejoined = _await_isr(cluster, "lag", [1, 2, 3], 15, asking=asking)
            print(f"left the ISR after {left:.1f} s stopped, rejoined {rejoined:.1f} s after SIGCONT")
            # the leader's state-change log says both, as committed (docs/state-change-log.md),
            # once it has the AlterPartition's answer (the UpdateMetadata that a client's
            # Metadata shows may reach the leader before that answer does)
            rest = sorted(set(cluster.broker_ids) - {stopped_id})
            wanted = [("Shrink", [1, 2, 3], rest, 0), ("Expand", rest, [1, 2, 3], 0)]
            wait(lambda: all(c in _isr_changes(cluster, leader, "lag") for c in wanted), 10,
                 f"{wanted} in broker {leader}'s state-change log")  # fmt: skip
        finally:
            left_pid = None if stopped is None else cluster.pid(f"broker-{stopped}")
            if left_pid is not None:
                os.kill(left_pid, signal.SIGCONT)
            stream.stop()
        consumed = consume_all(cluster, "lag")
        assert set(stream.acknowledged) <= set(consumed)


def test_a_network_cut_between_a_leader_and_its_followers_shrinks_and_heals_the_isr() -> None:
    """Broker 1's control listener behind a TCP proxy (kmeta.testing.tcp_proxy): SIGSTOP the
    proxy and its followers' fetches go silent (no FIN, no RST); past replica.lag.time.max.ms
    broker 1 drops them from the ISR (min.insync.replicas 1: acks=all goes on with broker 1
    alone); SIGCONT and they catch up and rejoin. No acknowledged record is lost."""
    with Cluster(3, session_timeout_ms=20_000, replica_lag_time_max_ms=1_500, barrier=False) as cluster:
        proxy = ProxyProcess(f"127.0.0.1:{cluster.config.control_port(1)}")
        try:
            cluster.advertise_control(1, proxy.port)
            cluster.create_topic("cut", assignment=[[1, 2, 3]], configs={"min.insync.replicas": "1"})
            _await_isr(cluster, "cut", [1, 2, 3], 10, asking=2)
            stream = Stream(cluster, "cut")
            stream.start()
            try:
                os.kill(proxy.proc.pid, signal.SIGSTOP)
                left = _await_isr(cluster, "cut", [1], 15, asking=2)
                acked = len(stream.acknowledged)
                time.sleep(0.5)
                assert len(stream.acknowledged) > acked  # (acks=all with the ISR of broker 1)
                os.kill(proxy.proc.pid, signal.SIGCONT)
                healed = _await_isr(cluster, "cut", [1, 2, 3], 20, asking=2)
                print(f"cut: ISR [1] after {left:.1f} s, healed {healed:.1f} s after the link came back")
            finally:
                os.kill(proxy.proc.pid, signal.SIGCONT)
                stream.stop()
            assert set(stream.acknowledged) <= set(consume_all(cluster, "cut"))
        finally:
            proxy.close()

