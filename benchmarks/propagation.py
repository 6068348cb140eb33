"""Propagation benchmark: how fast a controller change reaches every broker.

Starts a controller and 3 broker processes on free loopback ports, then measures:

1. ``create_to_visible``: CreateTopics (1 partition, RF 3) sent to broker 1 until a Metadata
   request to EVERY broker shows the topic with a leader; p50/p99 over ``--creates`` topics.
   Baseline in the same run: a Metadata round trip to one broker (the floor for "visible").
2. ``bulk``: ``--bulk-topics`` topics x ``--bulk-partitions`` partitions created through the
   admin API (one CreateTopics each, pipelined), time until every broker serves all of them.
3. ``resync``: the cluster holds ``--resync-partitions`` partitions; broker 3 is killed (-9)
   and restarted; time from its restart until it serves all of them.
4. ``reassign``: for each size N of ``--reassign-partitions`` (default 1 and 10,000), a topic of
   N partitions on brokers [1, 2] is moved to [3, 2] with one AlterPartitionReassignments:
   time until every broker serves the final replicas [3, 2] with leader 3 (1 was removed, so
   leadership moves): the new replica joins the ISR when the leader's AlterPartition says it
   caught up (an empty topic: at once). Baseline in the same run: creating the N-partition topic until
   every broker serves it (the same propagation path, one step instead of three).

Prints one JSON object. Example (full sizes):
    python benchmarks/propagation.py --creates 200 --bulk-topics 1000 --resync-partitions 100000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import alter_partition_reassignments as apr
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import metadata as md


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Cluster:
    def __init__(self, data_dir: Path, barrier: bool, session_timeout_ms: int) -> None:
        ports = free_ports(7)
        self.data_dir = data_dir
        self.controller_port = ports[0]
        self.client = {1: ports[1], 2: ports[2], 3: ports[3]}
        self.control = {1: ports[4], 2: ports[5], 3: ports[6]}
        self.barrier = barrier
        self.session_timeout_ms = session_timeout_ms
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def spawn(self, key: str, *args: str) -> None:
        self.procs[key] = subprocess.Popen(
            [sys.executable, "-m", "kmeta", *args, "--log-level", "ERROR"],
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )

    def start_broker(self, i: int) -> None:
        self.spawn(
            f"broker-{i}", "broker", "--broker-id", str(i),
            "--listeners", f"PLAINTEXT://127.0.0.1:{self.client[i]},CONTROL://127.0.0.1:{self.control[i]}",
            "--controller", f"127.0.0.1:{self.controller_port}",
        )  # fmt: skip

    def start(self) -> None:
        self.spawn(
            "controller", "controller",
            "--listeners", f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "--data-dir", str(self.data_dir / "controller"),
            "--session-timeout-ms", str(self.session_timeout_ms),
            "--propagation-barrier" if self.barrier else "--no-propagation-barrier",
            "--no-state-change-log",
        )  # fmt: skip
        for i in self.client:
            self.start_broker(i)

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()


async def connect(port: int, timeout_s: float = 30.0) -> KafkaConnection:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await KafkaConnection.open("127.0.0.1", port, client_id="bench")
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def metadata(conn: KafkaConnection, topics: list[str] | None) -> Any:
    req = md.MetadataRequest(
        version=12,
        topics=None if topics is None else tuple(md.MetadataRequestTopic(name=t) for t in topics),
        allow_auto_topic_creation=False,
    )
    return await conn.request(req, 60)


def serves(resp: Any, name: str, partitions: int) -> bool:
    for t in resp.topics:
        if t.name == name:
            return (
                t.error_code == 0
                and len(t.partitions) == partitions
                and all(p.leader_id >= 0 for p in t.partitions)
            )
    return False


def create_request(names: list[str], partitions: int, rf: int) -> Any:
    return ct.CreateTopicsRequest(
        version=7,
        topics=tuple(
            ct.CreatableTopic(name=n, num_partitions=partitions, replication_factor=rf)
            for n in names
        ),
        timeout_ms=120_000,
    )


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


async def wait_registered(conns: dict[int, KafkaConnection]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answers = [await metadata(c, []) for c in conns.values()]
        if all(len(a.brokers) == 3 for a in answers):
            return
        await asyncio.sleep(0.05)
    raise RuntimeError("brokers did not register")


async def bench_creates(conns: dict[int, KafkaConnection], n: int) -> dict[str, Any]:
    lat, ack, polls = [], [], []
    for i in range(n):
        name = f"lat-{i}"
        t0 = time.perf_counter()
        resp = await conns[1].request(create_request([name], 1, 3), 60)
        assert resp.topics[0].error_code == 0, resp
        t_ack = time.perf_counter()
        rounds = 0
        pending = set(conns)
        while pending:
            rounds += 1
            results = await asyncio.gather(*(metadata(conns[b], [name]) for b in pending))
            pending = {
                b for b, r in zip(list(pending), results, strict=True) if not serves(r, name, 1)
            }
        lat.append((time.perf_counter() - t0) * 1000)
        ack.append((t_ack - t0) * 1000)
        polls.append(rounds)
    base = []
    for _ in range(n):
        t0 = time.perf_counter()
        await metadata(conns[1], ["lat-0"])
        base.append((time.perf_counter() - t0) * 1000)
    return {
        "creates": n,
        "visible_all_ms_p50": round(pct(lat, 0.5), 3),
        "visible_all_ms_p99": round(pct(lat, 0.99), 3),
        "admin_ack_ms_p50": round(pct(ack, 0.5), 3),
        "admin_ack_ms_p99": round(pct(ack, 0.99), 3),
        "first_poll_visible_fraction": sum(1 for p in polls if p == 1) / n,
        "baseline_metadata_rtt_ms_p50": round(pct(base, 0.5), 3),
        "ratio_p50_to_baseline": round(pct(lat, 0.5) / max(pct(base, 0.5), 1e-9), 2),
    }


async def all_serve(conns: dict[int, KafkaConnection], names: set[str], partitions: int) -> bool:
    for conn in conns.values():
        resp = await metadata(conn, None)
        have = {
            t.name for t in resp.topics if t.error_code == 0 and len(t.partitions) == partitions
        }
        if not names <= have:
            return False
    return True


async def bench_bulk(
    conns: dict[int, KafkaConnection], topics: int, partitions: int
) -> dict[str, Any]:
    names = [f"bulk-{i}" for i in range(topics)]
    t0 = time.perf_counter()
    futures = [
        conns[1 + i % 3].send(create_request([n], partitions, 3)) for i, n in enumerate(names)
    ]
    responses = await asyncio.gather(*futures)
    t_acked = time.perf_counter()
    assert all(r.topics[0].error_code == 0 for r in responses)
    while not await all_serve(conns, set(names), partitions):  # noqa: ASYNC110 (polling brokers)
        await asyncio.sleep(0.01)
    t_all = time.perf_counter()
    return {
        "topics": topics,
        "partitions_per_topic": partitions,
        "all_acked_s": round(t_acked - t0, 3),
        "all_brokers_serve_s": round(t_all - t0, 3),
        "topics_per_s": round(topics / (t_all - t0), 1),
    }


async def bench_resync(
    cluster: Cluster, conns: dict[int, KafkaConnection], total: int, existing: int
) -> dict[str, Any]:
    per_topic = 1000
    need = max(0, total - existing)
    names = [f"resync-{i}" for i in range(-(-need // per_topic))]
    for i in range(0, len(names), 10):
        futures = [conns[1].send(create_request([n], per_topic, 3)) for n in names[i : i + 10]]
        for r in await asyncio.gather(*futures):
            assert r.topics[0].error_code == 0, r
    resp = await metadata(conns[1], None)
    held = sum(len(t.partitions) for t in resp.topics)
    conns[3].close()
    cluster.procs["broker-3"].send_signal(signal.SIGKILL)
    cluster.procs["broker-3"].wait()
    t0 = time.perf_counter()
    cluster.start_broker(3)
    conn = await connect(cluster.client[3])
    t_up = time.perf_counter()
    while True:
        r = await metadata(conn, None)
        if sum(len(t.partitions) for t in r.topics) >= held and len(r.brokers) == 3:
            break
        await asyncio.sleep(0.02)
    t_done = time.perf_counter()
    conns[3] = conn
    return {
        "partitions": held,
        "restart_to_serving_s": round(t_done - t0, 3),
        "listening_to_serving_s": round(t_done - t_up, 3),
    }


def assigned_create(name: str, partitions: int, replicas: tuple[int, ...]) -> Any:
    return ct.CreateTopicsRequest(
        version=7,
        topics=(
            ct.CreatableTopic(
                name=name,
                num_partitions=-1,
                replication_factor=-1,
                assignments=tuple(
                    ct.CreatableReplicaAssignment(p, replicas) for p in range(partitions)
                ),
            ),
        ),
        timeout_ms=120_000,
    )


async def wait_all(conns: dict[int, KafkaConnection], name: str, ok: Any) -> None:
    """Poll every broker's Metadata for ``name`` until ``ok(partitions)`` holds on all."""
    pending = set(conns)
    while pending:
        answers = await asyncio.gather(*(metadata(conns[b], [name]) for b in pending))
        pending = {
            b
            for b, r in zip(list(pending), answers, strict=True)
            if not (r.topics and r.topics[0].error_code == 0 and ok(r.topics[0].partitions))
        }


async def bench_reassign(conns: dict[int, KafkaConnection], size: int) -> dict[str, Any]:
    name = f"reassign-{size}"
    t0 = time.perf_counter()
    resp = await conns[1].request(assigned_create(name, size, (1, 2)), 120)
    assert resp.topics[0].error_code == 0, resp
    await wait_all(conns, name, lambda ps: len(ps) == size and all(p.leader_id == 1 for p in ps))
    create_s = time.perf_counter() - t0

    request = apr.AlterPartitionReassignmentsRequest(
        version=0,
        timeout_ms=120_000,
        topics=(
            apr.ReassignableTopic(
                name, tuple(apr.ReassignablePartition(p, (3, 2)) for p in range(size))
            ),
        ),
    )
    t0 = time.perf_counter()
    resp = await conns[2].request(request, 120)
    t_ack = time.perf_counter()
    assert all(p.error_code == 0 for t in resp.responses for p in t.partitions), resp

    def final(ps: Any) -> bool:
        return len(ps) == size and all(
            p.leader_id == 3 and list(p.replica_nodes) == [3, 2] for p in ps
        )

    await wait_all(conns, name, final)
    done_s = time.perf_counter() - t0
    return {
        "partitions": size,
        "alter_ack_ms": round((t_ack - t0) * 1000, 3),
        "alter_to_all_brokers_final_ms": round(done_s * 1000, 3),
        "baseline_create_to_all_brokers_ms": round(create_s * 1000, 3),
        "ratio_to_baseline": round(done_s / max(create_s, 1e-9), 2),
    }


async def run(args: argparse.Namespace, cluster: Cluster) -> dict[str, Any]:
    conns = {i: await connect(p) for i, p in cluster.client.items()}
    await wait_registered(conns)
    out: dict[str, Any] = {"barrier": args.barrier}
    out["create_to_visible"] = await bench_creates(conns, args.creates)
    if args.bulk_topics:
        out["bulk"] = await bench_bulk(conns, args.bulk_topics, args.bulk_partitions)
    if args.resync_partitions:
        existing = args.creates + args.bulk_topics * args.bulk_partitions
        out["resync"] = await bench_resync(cluster, conns, args.resync_partitions, existing)
    if args.reassign_partitions:
        out["reassign"] = {
            "sizes": [await bench_reassign(conns, n) for n in args.reassign_partitions],
        }
    for c in conns.values():
        c.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--creates", type=int, default=200)
    ap.add_argument("--bulk-topics", type=int, default=1000)
    ap.add_argument("--bulk-partitions", type=int, default=10)
    ap.add_argument("--resync-partitions", type=int, default=100_000)
    ap.add_argument("--barrier", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--session-timeout-ms", type=int, default=9000)
    ap.add_argument(
        "--reassign-partitions",
        type=lambda text: [int(x) for x in text.split(",") if x],
        default=[1, 10_000],
        help="reassign scenario sizes, comma-separated (empty: skip)",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kmeta-bench-") as tmp:
        cluster = Cluster(Path(tmp), args.barrier, args.session_timeout_ms)
        cluster.start()
        try:
            result = asyncio.run(run(args, cluster))
        finally:
            cluster.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
