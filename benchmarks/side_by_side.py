"""Metadata load, side by side: kmeta's broker, the framed echo ceiling and librdkafka's mock.

Processes: kmeta's broker (``metadata_load.broker_process``), the echo server
(``echo_server.serve_in_process``), the librdkafka mock cluster (``peer_mock``, when
confluent-kafka is installed) and ONE load-generator process, each its own process. The load
generator is the same for every target: ``metadata_load.LoadConnection`` with the same
Metadata v12 request frame, N connections x D requests in flight, for a bounded duration. It
measures every latency, so percentiles up to p99.9 come from the full sample.

With ``server_cpu`` every target (kmeta, echo, the mock with its threads) runs pinned to that
one CPU and the load generator to the others, so server CPU per request is measured on one
core that the load does not share (``kmeta bench metadata-load --server-cpu 0``).

Both clusters hold the same shape (TOPICS x 4 partitions, RF 3: the partition count the mock
gives an auto-created topic). Points run interleaved target by target and repeat ``repeat``
times; the medians are reported, with kmeta's req/s as ratios to the ceiling and to the peer.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import echo_server
import metadata_load
import peer_mock
from common import pct

from kmeta.net.connection import KafkaConnection

TARGETS = ("kmeta", "echo", "librdkafka-mock")
PERCENTILES = (50.0, 90.0, 99.0, 99.9)


# -- the load generator process ----------------------------------------------------------------
async def _load(
    port: int, template: bytes, conns: int, depth: int, duration_s: float
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    deadline = time.perf_counter() + duration_s
    dones: list[asyncio.Future[None]] = []
    transports = []
    start = time.perf_counter()
    for _ in range(conns):
        done: asyncio.Future[None] = loop.create_future()

        def factory(d: asyncio.Future[None] = done) -> asyncio.Protocol:
            return metadata_load.LoadConnection(template, depth, deadline, latencies, d)

        transport, _ = await loop.create_connection(factory, "127.0.0.1", port)
        dones.append(done)
        transports.append(transport)
    await asyncio.wait_for(asyncio.gather(*dones), duration_s + 30)
    elapsed = time.perf_counter() - start
    for t in transports:
        t.close()
    latencies.sort()
    out: dict[str, Any] = {
        "requests": len(latencies),
        "req_per_s": round(len(latencies) / elapsed, 1),
    }
    for q in PERCENTILES:
        out[f"p{q:g}_us"] = round(pct(latencies, q) * 1e6, 1) if latencies else None
    out["max_us"] = round(latencies[-1] * 1e6, 1) if latencies else None
    return out


def loadgen_process(conn: Connection) -> None:
    """Process entry: run one load per received job until None."""
    while (job := conn.recv()) is not None:
        conn.send(metadata_load._run(_load(*job)))


def _pinned(cpus: set[int] | None, target: Callable[..., None], *args: Any) -> None:
    """Process entry: run ``target`` on ``cpus`` only (threads it starts inherit them)."""
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    target(*args)


def pinning(server_cpu: int | None) -> tuple[set[int] | None, set[int] | None]:
    """(the targets' CPUs, the load generator's CPUs) for ``--server-cpu``; the generator gets
    every other CPU this process may use (all of them on a one-CPU machine)."""
    if server_cpu is None:
        return None, None
    allowed = os.sched_getaffinity(0)
    if server_cpu not in allowed:
        raise ValueError(f"--server-cpu {server_cpu} is not one of the usable CPUs {sorted(allowed)}")
    return {server_cpu}, (allowed - {server_cpu}) or allowed


# -- the driver --------------------------------------------------------------------------------
class SideBySide:
    """Starts the targets and the load generator; :meth:`point` measures one target once."""

    def __init__(self, topics: int, with_peer: bool = True, server_cpu: int | None = None) -> None:
        self.topics = topics
        self.server_cpus, self.loadgen_cpus = pinning(server_cpu)
        self.names = [f"topic-{t:04d}" for t in range(topics)]
        self.with_peer = with_peer and peer_mock.available()
        self.peer_error: str | None = None if self.with_peer else "confluent-kafka is not installed"
        self.ports: dict[str, int] = {}
        self.control: dict[str, Connection] = {}
        self.procs: list[Any] = []
        self._ctx = mp.get_context("spawn")  # the driver may run threads (the progress bar)

    def _spawn(self, cpus: set[int] | None, target: Callable[..., None], *args: Any) -> Connection:
        here, there = self._ctx.Pipe()
        proc = self._ctx.Process(target=_pinned, args=(cpus, target, there, *args), daemon=True)
        proc.start()
        self.procs.append(proc)
        return here

    def start(self) -> None:
        cpus = self.server_cpus
        broker = self._spawn(cpus, metadata_load.broker_process)
        echo = self._spawn(cpus, echo_server.serve_in_process)
        peer = self._spawn(cpus, peer_mock.serve_in_process, 3, self.names) if self.with_peer else None
        self.loadgen = self._spawn(self.loadgen_cpus, loadgen_process)
        broker_ports, echo_ports = broker.recv(), echo.recv()
        self.control = {"kmeta": broker, "echo": echo}
        self.ports = {"kmeta": broker_ports["PLAINTEXT"], "echo": echo_ports["PLAINTEXT"]}
        self.peer_info: dict[str, Any] = {}
        if peer is not None:
            info = peer.recv()
            if "error" in info:
                self.peer_error = info["error"]
            else:
                self.peer_info = info
                self.control["librdkafka-mock"] = peer
                self.ports["librdkafka-mock"] = info["PLAINTEXT"]
        asyncio.run(self._load_kmeta(broker_ports))

    async def _load_kmeta(self, ports: dict[str, int]) -> None:
        request = metadata_load.update_request(
            ports["PLAINTEXT"], self.topics, peer_mock.MOCK_PARTITIONS
        )
        conn = await KafkaConnection.open("127.0.0.1", ports["CONTROL"], client_id="kmeta-bench")
        try:
            resp = await conn.request(request, 60)
        finally:
            conn.close()
        if resp.error_code != 0:
            raise RuntimeError(f"UpdateMetadata to the benchmark broker failed: {resp.error_code}")

    def targets(self) -> list[str]:
        return [t for t in TARGETS if t in self.ports]

    def template(self, which: str) -> bytes:
        return metadata_load.request_frame(None if which == "all topics" else self.names[:1])

    def point(
        self, target: str, which: str, conns: int, depth: int, duration_s: float
    ) -> dict[str, Any]:
        server = self.control[target]
        server.send("cpu")
        cpu0 = server.recv()
        self.loadgen.send((self.ports[target], self.template(which), conns, depth, duration_s))
        result: dict[str, Any] = self.loadgen.recv()
        server.send("cpu")
        cpu1 = server.recv()
        n = max(1, result["requests"])
        result["server_cpu_us_per_response"] = round(
            (cpu1[0] + cpu1[1] - cpu0[0] - cpu0[1]) / n * 1e6, 1
        )
        result.update(target=target, request=which, connections=conns, depth=depth)
        return result

    def stop(self) -> None:
        if hasattr(self, "loadgen"):
            self.loadgen.send(None)
        for end in self.control.values():
            end.send("stop")
        for proc in self.procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()


def summarise(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median over repeats per (request, connections, depth), with kmeta's ratios."""
    groups: dict[tuple[str, int, int], dict[str, list[dict[str, Any]]]] = {}
    for p in points:
        key = (p["request"], p["connections"], p["depth"])
        groups.setdefault(key, {}).setdefault(p["target"], []).append(p)
    rows = []
    for (which, conns, depth), by_target in groups.items():
        row: dict[str, Any] = {
            "request": which,
            "connections": conns,
            "depth": depth,
            "targets": {},
        }
        for target, runs in by_target.items():
            agg: dict[str, Any] = {"repeats": len(runs)}
            for field in runs[0]:
                values = [r[field] for r in runs if isinstance(r.get(field), int | float)]
                if field not in ("connections", "depth") and values and len(values) == len(runs):
                    agg[field] = round(statistics.median(values), 1)
            row["targets"][target] = agg
        rate = {t: v["req_per_s"] for t, v in row["targets"].items()}
        if "kmeta" in rate:
            if rate.get("echo"):
                row["kmeta_to_ceiling"] = round(rate["kmeta"] / rate["echo"], 3)
            if rate.get("librdkafka-mock"):
                row["kmeta_to_peer"] = round(rate["kmeta"] / rate["librdkafka-mock"], 3)
        if rate.get("librdkafka-mock") and rate.get("echo"):
            row["peer_to_ceiling"] = round(rate["librdkafka-mock"] / rate["echo"], 3)
        rows.append(row)
    return rows
