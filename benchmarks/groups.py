"""Classic consumer groups: rebalance time and offset commit throughput, kmeta beside
librdkafka's mock cluster (which serves groups too) in one run.

    python benchmarks/groups.py [--members 3,10,50] [--rounds 3] [--topics 13]
        [--commit-consumers 4] [--commit-s 3] [--time-limit-s 600] [--no-peer]

The clients are confluent-kafka (librdkafka) consumers, all in this process (librdkafka's
threads do the network work; this process only polls them, so 50 members cost one process,
not 50). Each target is one broker: kmeta's ``kmeta.testing.Cluster(1)`` (its own processes)
or the mock (``test.mock.num.brokers=1``, in a process of its own, benchmarks/peer_mock.py).
Both hold the same ``--topics`` topics of 4 partitions (the mock auto-creates 4; 13 topics =
52 partitions, enough for 50 members to get one each), and the members use the roundrobin
assignor over all of them.

* **rebalance** (per member count N, ``--rounds`` times, median): N-1 members join a fresh
  group and settle (every member holds a non-empty share, the shares partition every
  partition); then the N-th member subscribes — the clock starts — and the clock stops at the
  last ``on_assign`` callback of the rebalance that follows (every one of the N members holds
  its new, non-empty share, all shares disjoint and covering every partition). The old members
  learn of the rebalance through their heartbeats (``heartbeat.interval.ms`` 100 on both
  targets), so this is what a member joining costs a group, end to end. librdkafka's mock
  does not end a join phase when every known member has rejoined, as Kafka does: it waits
  its rebalance timer (the session timeout less 1 s, ``session.timeout.ms`` 6000 here, Kafka's
  smallest by default), so its figure is that timer and the ratio says how much sooner kmeta
  completes the same rebalance; the commit ratio compares work done.
* **commit** (``--commit-consumers`` members of one settled group, one thread each): sync
  ``commit(offsets=[one partition])`` of the member's own partitions in turn, offsets rising,
  for ``--commit-s`` seconds: commits/s over all threads and each commit's latency; then every
  member's last committed offsets are read back (``committed()``) and must match.

Prints one JSON object with both targets and the ratios kmeta / mock. Bounded: every wait has
``--phase-timeout-s`` and the whole run ``--time-limit-s``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peer_mock

PARTITIONS_PER_TOPIC = peer_mock.MOCK_PARTITIONS
_deadline = float("inf")


def topic_names(n: int) -> list[str]:
    return [f"grp-{i:02d}" for i in range(n)]


def _check_time(what: str) -> None:
    if time.monotonic() > _deadline:
        raise TimeoutError(f"--time-limit-s reached during: {what}")


class Member:
    """One confluent-kafka consumer and the time and content of its last assignment."""

    def __init__(self, bootstrap: str, group: str, topics: list[str]) -> None:
        from confluent_kafka import Consumer

        self.assigned_at = 0.0
        self.share: list[tuple[str, int]] = []
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "partition.assignment.strategy": "roundrobin",
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 100, "log_level": 0,
            "topic.metadata.refresh.interval.ms": 60000,
        })  # fmt: skip
        self.consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, _c: Any, parts: list[Any]) -> None:
        self.share = sorted((p.topic, p.partition) for p in parts)
        self.assigned_at = time.monotonic()

    def _on_revoke(self, _c: Any, _parts: list[Any]) -> None:
        self.share = []

    def close(self) -> None:
        self.consumer.close()


def settled(members: list[Member], everything: set[tuple[str, int]], since: float) -> bool:
    """Every member assigned after ``since`` a non-empty share; the shares split everything."""
    shares = [m.share for m in members]
    if any(not s for s in shares) or any(m.assigned_at < since for m in members):
        return False
    flat = [p for s in shares for p in s]
    return len(flat) == len(set(flat)) and set(flat) == everything


def poll_until(members: list[Member], done: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        _check_time(what)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not settled in {timeout_s} s")
        for m in members:
            m.consumer.poll(0)
        time.sleep(0.001)


def rebalance_once(
    bootstrap: str, group: str, n: int, topics: list[str], timeout_s: float
) -> float:
    everything = {(t, p) for t in topics for p in range(PARTITIONS_PER_TOPIC)}
    members = [Member(bootstrap, group, topics) for _ in range(n - 1)]
    try:
        if members:
            poll_until(
                members, lambda: settled(members, everything, 0.0), timeout_s, f"{n - 1} members"
            )
        t0 = time.monotonic()
        members.append(Member(bootstrap, group, topics))
        poll_until(
            members, lambda: settled(members, everything, t0), timeout_s, f"member {n} joining"
        )
        return max(m.assigned_at for m in members) - t0
    finally:
        for m in members:
            m.close()


def rebalances(
    bootstrap: str, counts: list[int], rounds: int, topics: list[str], timeout_s: float, tag: str
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in counts:
        runs = [
            rebalance_once(bootstrap, f"{tag}-rb-{n}-{r}", n, topics, timeout_s)
            for r in range(rounds)
        ]
        out[str(n)] = {
            "median_s": round(statistics.median(runs), 4),
            "runs_s": [round(x, 4) for x in runs],
        }
    return out


def commits(
    bootstrap: str, consumers: int, seconds: float, topics: list[str], timeout_s: float, tag: str
) -> dict[str, Any]:
    from confluent_kafka import TopicPartition

    everything = {(t, p) for t in topics for p in range(PARTITIONS_PER_TOPIC)}
    members = [Member(bootstrap, f"{tag}-commit", topics) for _ in range(consumers)]
    try:
        poll_until(members, lambda: settled(members, everything, 0.0), timeout_s, "commit group")
        latencies: list[list[float]] = [[] for _ in members]
        last: list[dict[tuple[str, int], int]] = [{} for _ in members]
        errors: list[str] = []
        stop = time.monotonic() + seconds

        def run(i: int) -> None:
            m, offset = members[i], 0
            try:
                while time.monotonic() < stop:
                    topic, partition = m.share[offset % len(m.share)]
                    offset += 1
                    t = time.perf_counter()
                    m.consumer.commit(
                        offsets=[TopicPartition(topic, partition, offset)], asynchronous=False
                    )
                    latencies[i].append(time.perf_counter() - t)
                    last[i][(topic, partition)] = offset
            except Exception as exc:  # reported in the result: the run is then invalid
                errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(members))]
        began = time.monotonic()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        elapsed = time.monotonic() - began
        mismatched = 0
        for m, mine in zip(members, last, strict=True):
            asked = [TopicPartition(t, p) for t, p in mine]
            for tp in m.consumer.committed(asked, timeout=timeout_s):
                mismatched += tp.offset != mine[(tp.topic, tp.partition)]
        flat = sorted(x for lat in latencies for x in lat)
        total = len(flat)
        return {
            "consumers": consumers,
            "commits": total,
            "commits_s": round(total / elapsed, 1),
            "p50_ms": round(statistics.median(flat) * 1000, 3) if flat else None,
            "p99_ms": round(flat[min(total - 1, int(total * 0.99))] * 1000, 3) if flat else None,
            "read_back_mismatches": mismatched,
            "errors": errors[:5],
        }
    finally:
        for m in members:
            m.close()


def run_target(bootstrap: str, a: argparse.Namespace, tag: str) -> dict[str, Any]:
    topics = topic_names(a.topics)
    return {
        "rebalance": rebalances(bootstrap, a.members, a.rounds, topics, a.phase_timeout_s, tag),
        "commit": commits(
            bootstrap, a.commit_consumers, a.commit_s, topics, a.phase_timeout_s, tag
        ),
    }


def kmeta_target(a: argparse.Namespace) -> dict[str, Any]:
    from kmeta.testing import Cluster

    # Kafka's defaults but the initial rebalance delay (which only holds up the first members
    # of an empty group, not the rebalance measured here): 0 as the mock's fresh groups
    with Cluster(1, group_initial_rebalance_delay_ms=0) as cluster:
        for name in topic_names(a.topics):
            cluster.create_topic(name, PARTITIONS_PER_TOPIC, 1)
        cluster.wait_converged()
        return run_target(cluster.bootstrap_servers, a, "kmeta")


def mock_target(a: argparse.Namespace) -> dict[str, Any]:
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.get_context("spawn").Process(
        target=peer_mock.serve_in_process, args=(child, 1, topic_names(a.topics))
    )
    proc.start()
    try:
        info = parent.recv()
        if "error" in info:
            return {"skipped": info["error"]}
        return run_target(info["bootstrap"], a, "mock")
    finally:
        parent.send("stop")
        proc.join(10)
        if proc.is_alive():
            proc.kill()


def ratios(kmeta: dict[str, Any], mock: dict[str, Any]) -> dict[str, float | None]:
    def div(x: Any, y: Any) -> float | None:
        return (
            round(x / y, 3)
            if isinstance(x, int | float) and isinstance(y, int | float) and y
            else None
        )

    out: dict[str, float | None] = {}
    for n, figures in kmeta["rebalance"].items():
        peer = mock.get("rebalance", {}).get(n, {})
        out[f"rebalance_{n}_kmeta_over_mock"] = div(figures["median_s"], peer.get("median_s"))
    out["commits_s_kmeta_over_mock"] = div(
        kmeta["commit"]["commits_s"], mock.get("commit", {}).get("commits_s")
    )
    return out


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> None:
    global _deadline
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--members", type=ints, default=[3, 10, 50], help="group sizes")
    parser.add_argument("--rounds", type=int, default=3, help="rebalances per size (median)")
    parser.add_argument("--topics", type=int, default=13, help="topics of 4 partitions")
    parser.add_argument("--commit-consumers", type=int, default=4)
    parser.add_argument("--commit-s", type=float, default=3.0)
    parser.add_argument("--phase-timeout-s", type=float, default=120.0)
    parser.add_argument("--time-limit-s", type=float, default=900.0)
    parser.add_argument("--no-peer", action="store_true", help="skip librdkafka's mock")
    a = parser.parse_args()
    if min(a.members) < 1 or a.rounds < 1 or a.commit_consumers < 1:
        raise SystemExit("--members, --rounds and --commit-consumers must be >= 1")
    if max(a.members) > a.topics * PARTITIONS_PER_TOPIC:
        raise SystemExit("--topics: every member needs a partition (4 per topic)")
    if not peer_mock.available():
        raise SystemExit("confluent-kafka is required (make install)")
    _deadline = time.monotonic() + a.time_limit_s
    load_start = [round(x, 2) for x in os.getloadavg()]
    try:
        kmeta = kmeta_target(a)
        mock = {"skipped": "--no-peer"} if a.no_peer else mock_target(a)
    except TimeoutError as exc:
        print(json.dumps({"error": f"timed out: {exc}"}))
        raise SystemExit(1) from None
    result = {
        "parameters": vars(a),
        "clients": f"confluent-kafka consumers in one process (librdkafka {peer_mock_version()})",
        "kmeta": kmeta,
        "librdkafka_mock": mock,
        "notes": "the mock ends a rebalance's join phase on its timer (session.timeout.ms - 1 s),"
        " Kafka and kmeta when every member rejoined",
        "ratios": ratios(kmeta, mock),
        "load_average": {"start": load_start, "end": [round(x, 2) for x in os.getloadavg()]},
    }
    print(json.dumps(result, indent=2))


def peer_mock_version() -> str:
    import confluent_kafka

    return str(confluent_kafka.libversion()[0])


if __name__ == "__main__":
    main()
