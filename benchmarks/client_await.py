"""How fast kmeta.client sees new topics, and how many Metadata requests one process drives.

    .venv/bin/python benchmarks/client_await.py [--target mini|kmeta] [--trials 40] [--seconds 2]

* await latency: a client is running; ``wait_on_metadata(topic)`` starts, the topic is created
  a random 0-300 ms later, and we time creation -> return. Reported for Kafka's defaults
  (retry_backoff_ms 100 -> 1000) and for retry_backoff_ms 10 -> 100. Baseline: one raw
  Metadata round trip on a KafkaConnection (the floor any client could reach).
* request rate: Metadata refreshes per second from one MetadataClient (serial: one in flight,
  as Kafka's updater does) and from 32 clients in this process, with the backoff set to 0.
  Baseline: the same process pipelining raw Metadata requests on 32 KafkaConnections.
  The servers run in a child process so they do not share this process's CPU.

Targets: ``mini`` (tests/client/mini_broker.py, 3 servers), ``kmeta`` (3 in-process kmeta
brokers fed UpdateMetadata, for the latency part; the rate part always uses mini servers in a
child process). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kmeta.client import MetadataClient
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import metadata as md

CreateTopic = Callable[[str], Awaitable[None]]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def summary_ms(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(pct(values, 50) * 1000, 2),
        "p99_ms": round(pct(values, 99) * 1000, 2),
        "max_ms": round(max(values) * 1000, 2),
        "n": len(values),
    }


# -- targets -----------------------------------------------------------------------------------
async def mini_target() -> tuple[str, CreateTopic, Callable[[], Awaitable[None]]]:
    from tests.client.mini_broker import start_cluster

    state, brokers = await start_cluster(3)

    async def create(name: str) -> None:
        state.create_topic(name, partitions=3)

    async def stop() -> None:
        for b in brokers:
            await b.stop()

    return ",".join(b.address for b in brokers), create, stop


async def kmeta_target() -> tuple[str, CreateTopic, Callable[[], Awaitable[None]]]:
    from kmeta.server.broker import Broker
    from tests.server.helpers import (
        CONTROL,
        PLAINTEXT,
        live_broker,
        loopback_config,
        partition,
        update_metadata,
    )

    brokers = [Broker(loopback_config(i)) for i in (1, 2, 3)]
    for b in brokers:
        await b.start()
    live = [
        live_broker(b.config.broker_id, {PLAINTEXT: ("127.0.0.1", b.port(PLAINTEXT))})
        for b in brokers
    ]
    conns = [await KafkaConnection.open("127.0.0.1", b.port(CONTROL)) for b in brokers]

    async def create(name: str) -> None:
        req = update_metadata(live, {name: [partition(i, 1 + i, (1 + i,)) for i in range(3)]})
        await asyncio.gather(*(c.request(req, 5) for c in conns))

    await create("warmup")

    async def stop() -> None:
        for c in conns:
            c.close()
        for b in brokers:
            await b.stop()

    return ",".join(f"127.0.0.1:{b.port(PLAINTEXT)}" for b in brokers), create, stop


# -- measurements ------------------------------------------------------------------------------
async def raw_round_trip(bootstrap: str, n: int = 200) -> float:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    conn = await KafkaConnection.open(host, int(port))
    request = md.MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False)
    times = []
    for _ in range(n):
        start = time.perf_counter()
        await conn.request(request, 5)
        times.append(time.perf_counter() - start)
    conn.close()
    return statistics.median(times)


async def await_latency(
    bootstrap: str, create: CreateTopic, trials: int, **settings: Any
) -> dict[str, float]:
    rng = random.Random(42)
    latencies: list[float] = []
    async with MetadataClient(bootstrap, **settings) as client:
        await client.refresh(10)
        for i in range(trials):
            topic = f"t-{settings.get('retry_backoff_ms', 100)}-{i}-{time.monotonic_ns()}"
            waiter = asyncio.create_task(client.wait_on_metadata(topic, max_wait_s=10))
            await asyncio.sleep(rng.uniform(0, 0.3))
            created = time.perf_counter()
            await create(topic)
            await waiter
            latencies.append(time.perf_counter() - created)
        requests = client.network_client.stats.metadata_requests
    return {**summary_ms(latencies), "metadata_requests": requests}


async def refresh_rate(bootstrap: str, clients: int, seconds: float) -> float:
    zero = {"retry_backoff_ms": 0, "retry_backoff_max_ms": 0}
    pool = [MetadataClient(bootstrap, all_topics=True, **zero) for _ in range(clients)]
    for c in pool:
        c.start()
    await asyncio.gather(*(c.refresh(10) for c in pool))
    done = 0
    deadline = time.perf_counter() + seconds

    async def loop(c: MetadataClient) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await c.refresh(10)
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(loop(c) for c in pool))
    elapsed = time.perf_counter() - start
    await asyncio.gather(*(c.close() for c in pool))
    return done / elapsed


async def raw_rate(bootstrap: str, conns: int, seconds: float) -> float:
    addresses = [a.rsplit(":", 1) for a in bootstrap.split(",")]
    opened = [
        await KafkaConnection.open(
            addresses[i % len(addresses)][0], int(addresses[i % len(addresses)][1])
        )
        for i in range(conns)
    ]
    request = md.MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False)
    done = 0
    deadline = time.perf_counter() + seconds

    async def loop(conn: KafkaConnection) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await conn.request(request, 10)
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(loop(c) for c in opened))
    elapsed = time.perf_counter() - start
    for c in opened:
        c.close()
    return done / elapsed


# -- child-process servers for the rate part ---------------------------------------------------
async def serve_forever(topics: int) -> None:
    from tests.client.mini_broker import start_cluster

    state, brokers = await start_cluster(3)
    for i in range(topics):
        state.create_topic(f"topic-{i}", partitions=3, replication=3)
    print(",".join(b.address for b in brokers), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    target = await (kmeta_target() if args.target == "kmeta" else mini_target())
    bootstrap, create, stop = target
    try:
        rtt = await raw_round_trip(bootstrap)
        default = await await_latency(bootstrap, create, args.trials)
        fast = await await_latency(
            bootstrap, create, args.trials, retry_backoff_ms=10, retry_backoff_max_ms=100
        )
    finally:
        await stop()
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--serve",
        "--topics",
        str(args.topics),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        remote = (await asyncio.wait_for(child.stdout.readline(), 30)).decode().strip()
        one = await refresh_rate(remote, 1, args.seconds)
        many = await refresh_rate(remote, 32, args.seconds)
        raw = await raw_rate(remote, 32, args.seconds)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        await asyncio.wait_for(child.wait(), 10)
    return {
        "target": args.target,
        "await_latency": {
            "baseline_raw_metadata_rtt_ms": round(rtt * 1000, 3),
            "kafka_defaults_backoff_100_1000": default,
            "backoff_10_100": fast,
            "p50_over_rtt_defaults": round(default["p50_ms"] / (rtt * 1000), 1),
            "p50_over_rtt_fast": round(fast["p50_ms"] / (rtt * 1000), 1),
        },
        "metadata_requests_per_s": {
            "topics_in_response": args.topics,
            "one_client_serial": round(one),
            "32_clients_one_process": round(many),
            "baseline_raw_32_connections": round(raw),
            "32_clients_over_raw": round(many / raw, 2),
        },
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=("mini", "kmeta"), default="mini")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--topics", type=int, default=10, help="topics in each rate response")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.serve:
        asyncio.run(serve_forever(ns.topics))
    else:
        print(json.dumps(asyncio.run(main(ns)), indent=2))
