"""Soak: one broker holding many idle connections; memory per connection and Metadata p99.

Processes: the broker (``python -m kmeta broker``, so its RSS is its own), and ``--procs``
load generators that each open their share of ``--connections`` idle TCP connections and
hold them until told to stop. This script pushes a small cluster (TOPICS x PARTITIONS) to the
broker's CONTROL listener, then measures Metadata latency on one connection (sequential
requests) in three phases: before the idle connections (baseline), while they are held, and
after they are released. RSS comes from /proc/<pid>/status. Everything stops by itself within
``--timeout`` seconds. Prints JSON.

    .venv/bin/python benchmarks/soak.py --connections 10000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.messages import update_metadata as um

TOPICS, PARTITIONS = 100, 8


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _raise_nofile(need: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, need)) if hard != resource.RLIM_INFINITY else max(soft, need)
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return want


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def _holder(port: int, count: int, pipe: Connection, hold_s: float) -> None:
    """Open ``count`` idle connections, report, hold them until told (or hold_s passes)."""
    _raise_nofile(count + 64)
    socks = []
    failed = 0
    for _ in range(count):
        s = socket.socket()
        try:
            s.connect(("127.0.0.1", port))
            socks.append(s)
        except OSError:
            s.close()
            failed += 1
    pipe.send((len(socks), failed))
    if pipe.poll(hold_s):
        pipe.recv()
    for s in socks:
        s.close()


def _update_metadata(port: int) -> Any:
    ep = um.UpdateMetadataEndpoint(
        port=port, host="127.0.0.1", listener="PLAINTEXT", security_protocol=0
    )
    topics = tuple(
        um.UpdateMetadataTopicState(
            topic_name=f"topic-{t}",
            topic_id=__import__("uuid").uuid4(),
            partition_states=tuple(
                um.UpdateMetadataPartitionState(
                    partition_index=p,
                    controller_epoch=1,
                    leader=1,
                    leader_epoch=1,
                    isr=(1,),
                    zk_version=0,
                    replicas=(1,),
                    offline_replicas=(),
                )
                for p in range(PARTITIONS)
            ),
        )
        for t in range(TOPICS)
    )
    return um.UpdateMetadataRequest(
        version=8, controller_id=1, controller_epoch=1, broker_epoch=-1, topic_states=topics,
        live_brokers=(um.UpdateMetadataBroker(id=1, endpoints=(ep,), rack=None),),
    )  # fmt: skip


async def _latencies(port: int, n: int) -> dict[str, float]:
    conn = await KafkaConnection.open("127.0.0.1", port)
    one = md.MetadataRequest(version=12, topics=(md.MetadataRequestTopic(name="topic-7"),))
    every = md.MetadataRequest(version=12, topics=None)
    out: dict[str, list[float]] = {"one_topic": [], "all_topics": []}
    try:
        for i in range(n):
            for name, req in (("one_topic", one), ("all_topics", every)):
                t0 = time.perf_counter()
                resp = await conn.request(req, 10)
                out[name].append((time.perf_counter() - t0) * 1000)
                if i == 0:
                    assert len(resp.topics) == (1 if req is one else TOPICS)
    finally:
        conn.close()
    result: dict[str, float] = {}
    for name, xs in out.items():
        xs.sort()
        result[f"{name}_p50_ms"] = round(statistics.median(xs), 3)
        result[f"{name}_p99_ms"] = round(xs[int(len(xs) * 0.99) - 1], 3)
    return result


async def _push(control_port: int, client_port: int) -> None:
    conn = await KafkaConnection.open("127.0.0.1", control_port)
    assert (await conn.request(_update_metadata(client_port), 10)).error_code == 0
    conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=10_000)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--requests", type=int, default=2000, help="per phase and request kind")
    ap.add_argument("--timeout", type=float, default=120.0)
    args = ap.parse_args()
    deadline = time.monotonic() + args.timeout
    nofile = _raise_nofile(args.connections + 256)  # the broker inherits it
    client_port, control_port = _free_port(), _free_port()
    broker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kmeta",
            "broker",
            "--broker-id",
            "1",
            "--listeners",
            f"PLAINTEXT://127.0.0.1:{client_port},CONTROL://127.0.0.1:{control_port}",
            "--log-level",
            "WARNING",
        ],
        stdout=subprocess.DEVNULL,
    )
    holders: list[tuple[mp.Process, Connection]] = []
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", client_port), 0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        asyncio.run(_push(control_port, client_port))
        time.sleep(0.5)
        rss_before = _rss_kib(broker.pid)
        baseline = asyncio.run(_latencies(client_port, args.requests))

        ctx = mp.get_context("spawn")
        share = args.connections // args.procs
        t0 = time.monotonic()
        for i in range(args.procs):
            ours, theirs = ctx.Pipe()
            n = share + (args.connections % args.procs if i == 0 else 0)
            hold_s = max(1.0, deadline - time.monotonic())
            p = ctx.Process(target=_holder, args=(client_port, n, theirs, hold_s), daemon=True)
            p.start()
            holders.append((p, ours))
        opened = failed = 0
        for _, pipe in holders:
            if not pipe.poll(max(1.0, deadline - time.monotonic())):
                raise TimeoutError("a load generator did not report")
            o, f = pipe.recv()
            opened, failed = opened + o, failed + f
        open_s = time.monotonic() - t0
        time.sleep(1.0)  # let the broker accept the backlog
        rss_held = _rss_kib(broker.pid)
        held = asyncio.run(_latencies(client_port, args.requests))
        rss_held_after = _rss_kib(broker.pid)
        for _, pipe in holders:
            pipe.send("stop")
        for p, _ in holders:
            p.join(max(1.0, deadline - time.monotonic()))
        time.sleep(1.0)
        released = asyncio.run(_latencies(client_port, args.requests))
        rss_released = _rss_kib(broker.pid)
        alive = broker.poll() is None
    finally:
        for p, _ in holders:
            if p.is_alive():
                p.kill()
        broker.terminate()
        try:
            broker.wait(10)
        except subprocess.TimeoutExpired:
            broker.kill()
    rss_delta = rss_held - rss_before
    print(
        json.dumps(
            {
                "benchmark": "soak",
                "connections_requested": args.connections,
                "connections_open": opened,
                "connections_failed": failed,
                "open_s": round(open_s, 2),
                "nofile_limit": nofile,
                "cluster": {"topics": TOPICS, "partitions_per_topic": PARTITIONS},
                "broker_rss_kib": {
                    "before": rss_before,
                    "held": rss_held,
                    "held_after_latency_phase": rss_held_after,
                    "released": rss_released,
                },
                "bytes_per_connection": round(rss_delta * 1024 / max(opened, 1)),
                "metadata_latency": {"baseline": baseline, "held": held, "released": released},
                "p99_ratio_held_vs_baseline": {
                    k: round(held[k] / baseline[k], 2) for k in baseline if k.endswith("p99_ms")
                },
                "broker_alive": alive,
                "load_avg": os.getloadavg(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
