"""The data plane beside librdkafka's mock cluster and the echo ceiling, in one run.

    .venv/bin/python benchmarks/data_plane.py [--mb 64] [--record-bytes 1024]
        [--latency-s 5] [--fetch-s 3] [--connections 4] [--rounds 3] [--no-peer]

What each figure is (issue 28's acceptance point 7), measured on both targets in the same run
so that the ratios mean something on a shared, noisy machine:

* ``produce_mb_s``: a real producer (confluent-kafka, librdkafka) in a process of its own sends
  ``--mb`` MiB of ``--record-bytes`` records, batched (``linger.ms`` 5, ``batch.size`` 1 MiB,
  no compression, acks=1, idempotence off), to one topic of 4 partitions on one broker;
  from the first ``produce()`` to the end of ``flush()``. ``--rounds`` rounds on each target,
  each into a topic of its own, alternating between the two targets (both are up at once, so
  both see the same neighbours); the median round counts. One round of 64 MiB takes ~0.12 s,
  and a freshly started target's first round is its slowest: as the only round (until
  2026-11-30) it measured the start as much as the rate (kmeta's first round 406-523 MB/s
  against 488-557 for its later ones, in the same runs; ``rounds_mb_s`` keeps them all).
* ``consume_mb_s``: a real consumer (confluent-kafka, partitions assigned, no group) reads that
  whole log from the log start to the high watermark; from ``assign()`` to the last record.
  (librdkafka's mock keeps the last 5 MB of each partition only: it reads what it kept.)
* ``fetch_vs_echo``: raw Fetch requests for one partition's first MiB (a response of about
  1 MiB, well over 64 KiB), ``--connections`` connections x 1 in flight for ``--fetch-s``
  seconds, against kmeta's broker and against the echo server answering the same number of
  bytes (its floor: the kernel's copy, nothing built). MB/s of answers each, and their ratio.
* ``produce_idempotent`` / ``produce_plain_acks_all`` (kmeta only): the same ``--mb`` MiB again
  into fresh topics of the same shape, with ``enable.idempotence`` on (librdkafka's
  InitProducerId first, outside the timed part; then a producer id and sequences in every
  batch, so the broker's producer state checks each) and off, both acks=all (which idempotence
  requires), three rounds each alternating, the best round of each kept: their ratio is issue
  30's >= 0.9x.
* ``latency``: a producer sends at half the peak rate measured above (linger.ms 5, librdkafka's
  default: with 0 it sends each record in a request of its own, which measures the broker's
  per-request cost, not latency) with its
  send time in each value; a consumer tails the log and takes receive - send: p50 / p99 in ms.
* ``memory``: kmeta's broker RSS idle (topic created, nothing produced) and after the produce,
  against the record bytes it holds (every produce round's); ``rss_growth_per_held_byte`` is
  the ratio the issue bounds
  at 1.2. The broker keeps its logs in files, as ``kmeta cluster up`` and the fixture give it
  (the segments' bytes are in the page cache, not its RSS; kmeta/log's memory mode, measured
  in tests/log, holds them at 1.0x).

The mock cluster (``peer_mock``) auto-creates its topic with 4 partitions; kmeta's topic has
the same shape. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import multiprocessing
import os
import struct
import sys
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import echo_server
import peer_mock

TOPIC = "bench-data"
PARTITIONS = 4
FETCH_MAX_BYTES = 1 << 20
#: rounds of idempotent and plain (acks=all) produce each, alternating; the best of each counts
IDEMPOTENCE_ROUNDS = 3
IDEMPOTENCE_MODES = ("produce_plain_acks_all", "produce_idempotent")
#: produce rounds on each target by default (``--rounds``; the module docstring)
PRODUCE_ROUNDS = 3


def round_topic(i: int) -> str:
    """Produce round ``i``'s topic: the first is the one the consumer then reads whole."""
    return TOPIC if i == 0 else f"{TOPIC}-round-{i}"


# -- client processes --------------------------------------------------------------------------
def _producer_config(bootstrap: str, linger_ms: int, idempotent: bool = False) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": "all" if idempotent else 1,  # (idempotence requires acks=all)
        "linger.ms": linger_ms,
        "batch.size": 1 << 20,
        "compression.type": "none",
        "enable.idempotence": idempotent,
        "queue.buffering.max.kbytes": 256 * 1024,
        "log_level": 0,
    }


def produce_process(
    conn: Connection, bootstrap: str, mb: int, record_bytes: int, topic: str = TOPIC,
    idempotent: bool = False,
) -> None:  # fmt: skip
    """Send ``mb`` MiB of records as fast as the producer takes them; report MB/s."""
    from confluent_kafka import Producer

    producer = Producer(_producer_config(bootstrap, 5, idempotent))
    value = os.urandom(record_bytes)
    count = (mb << 20) // record_bytes
    failed = 0

    def report(err: Any, _msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    producer.list_topics(topic, timeout=10)
    if idempotent:  # (its producer id first, InitProducerId, outside the timed part)
        producer.produce(topic, b"warm-up", partition=0)
        producer.flush(30)
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
    left = producer.flush(120)
    elapsed = time.perf_counter() - start
    conn.send(
        {
            "records": count,
            "bytes": count * record_bytes,
            "seconds": round(elapsed, 3),
            "mb_s": round(count * record_bytes / elapsed / 1e6, 1),
            "records_s": round(count / elapsed),
            "failed": failed + left,
        }
    )


def _consumer(bootstrap: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kmeta-bench",  # (required by the client; assign() joins no group)
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 << 20,
            "max.partition.fetch.bytes": 8 << 20,
            "fetch.wait.max.ms": 100,
            "log_level": 0,
        }
    )


def consume_process(conn: Connection, bootstrap: str) -> None:
    """Read each partition from its log start to the high watermark it had when the read
    began; report MB/s. (librdkafka's mock keeps only the last 5 MB of a partition, so its log
    start moves while the producer writes: what it holds is what gets read.)"""
    from confluent_kafka import TopicPartition

    consumer = _consumer(bootstrap)
    marks = {
        p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)
        for p in range(PARTITIONS)
    }
    expected = sum(high - low for low, high in marks.values())
    start = time.perf_counter()
    consumer.assign([TopicPartition(TOPIC, p, low) for p, (low, _) in marks.items()])
    left = {p for p, (low, high) in marks.items() if high > low}
    got, size, errors = 0, 0, 0
    deadline = time.monotonic() + 120
    while left and time.monotonic() < deadline:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is not None:
                errors += 1
                continue
            got += 1
            size += len(msg.value())
            if msg.offset() >= marks[msg.partition()][1] - 1:
                left.discard(msg.partition())
    elapsed = time.perf_counter() - start
    consumer.close()
    conn.send(
        {
            "records": got,
            "expected": expected,
            "bytes": size,
            "seconds": round(elapsed, 3),
            "mb_s": round(size / elapsed / 1e6, 1),
            "errors": errors,
        }
    )


def tail_process(conn: Connection, bootstrap: str, seconds: float) -> None:
    """The latency run's consumer, in a process of its own (the producer's loop would hold its
    GIL): from the log end, takes receive - send of every record for ``seconds``, after
    saying it is ready."""
    from confluent_kafka import OFFSET_END, TopicPartition

    consumer = _consumer(bootstrap)
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_END) for p in range(PARTITIONS)])
    consumer.consume(1, 1.0)  # the first fetches are out before the first record
    conn.send("ready")
    samples: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for msg in consumer.consume(1000, 0.1):
            if msg.error() is None and msg.value()[:1] == b"L":
                (sent,) = struct.unpack_from(">d", msg.value(), 1)
                samples.append(time.time() - sent)
    consumer.close()
    samples.sort()
    conn.send(
        {
            "received": len(samples),
            "p50_ms": round(_pct(samples, 50) * 1e3, 2) if samples else None,
            "p99_ms": round(_pct(samples, 99) * 1e3, 2) if samples else None,
        }
    )


def latency_process(conn: Connection, bootstrap: str, rate: float, seconds: float) -> None:
    """Produce at ``rate`` records/s (linger.ms 5) with the send time in each value while
    :func:`tail_process` reads them back; reports the rate, what was sent and the percentiles
    of produce -> consume in ms."""
    from confluent_kafka import Producer

    parent, child = multiprocessing.Pipe()
    tail = multiprocessing.get_context("spawn").Process(
        target=tail_process, args=(child, bootstrap, seconds + 3.0)
    )
    tail.start()
    try:
        if not parent.poll(60) or parent.recv() != "ready":
            raise TimeoutError("the latency consumer did not start")
        producer = Producer(_producer_config(bootstrap, 5))
        pad = os.urandom(1024 - 9)
        start = time.perf_counter()
        sent = 0
        while (now := time.perf_counter()) - start < seconds:
            due = int((now - start) * rate)
            while sent < due:
                value = b"L" + struct.pack(">d", time.time()) + pad
                try:
                    producer.produce(TOPIC, value, partition=sent % PARTITIONS)
                except BufferError:
                    break
                sent += 1
            producer.poll(0.001)
        producer.flush(30)
        if not parent.poll(seconds + 60):
            raise TimeoutError("the latency consumer gave no result")
        got = parent.recv()
    finally:
        tail.join(10)
        if tail.is_alive():
            tail.kill()
    conn.send({"rate_records_s": round(rate), "sent": sent, **got})


def _pct(sorted_values: list[float], q: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[index]


def _in_process(target: Any, *args: Any, timeout_s: float = 300) -> Any:
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.get_context("spawn").Process(target=target, args=(child, *args))
    proc.start()
    try:
        if not parent.poll(timeout_s):
            raise TimeoutError(f"{target.__name__} gave no result in {timeout_s} s")
        return parent.recv()
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()


# -- raw Fetch load (kmeta against the echo ceiling) -------------------------------------------
def _fetch_frame() -> bytes:
    from kmeta.protocol.header import RequestHeader, encode_request_header
    from kmeta.protocol.messages import fetch as fe

    request = fe.FetchRequest(
        version=12,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=FETCH_MAX_BYTES,
        topics=(
            fe.FetchTopic(
                topic=TOPIC,
                partitions=(
                    fe.FetchPartition(
                        partition=0, fetch_offset=0, partition_max_bytes=FETCH_MAX_BYTES
                    ),
                ),
            ),
        ),
    )
    out = bytearray()
    encode_request_header(RequestHeader(1, 12, 1, "kmeta-bench"), out)
    fe.REQUEST.encode_into(request, out)
    return len(out).to_bytes(4, "big") + bytes(out)


class _FetchLoad(asyncio.Protocol):
    """One connection: one Fetch in flight at a time until the deadline; counts answer bytes."""

    def __init__(self, frame: bytes, deadline: float, done: asyncio.Future[None]) -> None:
        self.frame, self.deadline, self.done = frame, deadline, done
        self.buf = bytearray()
        self.answers = 0
        self.bytes = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.frame)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= 4:
            size = int.from_bytes(self.buf[:4], "big")
            if len(self.buf) < 4 + size:
                return
            del self.buf[: 4 + size]
            self.answers += 1
            self.bytes += size
            if time.perf_counter() >= self.deadline:
                if not self.done.done():
                    self.done.set_result(None)
                return
            assert self.transport is not None
            self.transport.write(self.frame)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _fetch_load(port: int, frame: bytes, conns: int, seconds: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    deadline = start + seconds
    loads: list[_FetchLoad] = []
    for _ in range(conns):
        done: asyncio.Future[None] = loop.create_future()
        await loop.create_connection(
            lambda d=done: _remember(loads, frame, deadline, d), "127.0.0.1", port
        )
    await asyncio.wait_for(asyncio.gather(*(load.done for load in loads)), seconds + 30)
    elapsed = time.perf_counter() - start
    for load in loads:
        if load.transport is not None:
            load.transport.close()
    answers = sum(load.answers for load in loads)
    size = sum(load.bytes for load in loads)
    return {
        "answers": answers,
        "answer_bytes": size // max(answers, 1),
        "mb_s": round(size / elapsed / 1e6, 1),
    }


def _remember(
    loads: list[_FetchLoad], frame: bytes, deadline: float, done: asyncio.Future[None]
) -> _FetchLoad:
    load = _FetchLoad(frame, deadline, done)
    loads.append(load)
    return load


def fetch_load_process(conn: Connection, port: int, conns: int, seconds: float) -> None:
    conn.send(asyncio.run(_fetch_load(port, _fetch_frame(), conns, seconds)))


def _one_fetch_size(port: int) -> int:
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(_fetch_frame())
        size = int.from_bytes(peer_mock._recv_exactly(sock, 4), "big")
        peer_mock._recv_exactly(sock, size)
    return size


def fetch_vs_echo(port: int, conns: int, seconds: float) -> dict[str, Any]:
    size = _one_fetch_size(port)
    kmeta = _in_process(fetch_load_process, port, conns, seconds)
    parent, child = multiprocessing.Pipe()
    echo = multiprocessing.get_context("spawn").Process(
        target=echo_server.serve_in_process, args=(child,), kwargs={"reply_size": size - 4}
    )
    echo.start()
    try:
        echo_port = _echo_port(parent)
        ceiling = _in_process(fetch_load_process, echo_port, conns, seconds)
    finally:
        parent.send("stop")
        echo.join(10)
        if echo.is_alive():
            echo.kill()
    return {
        "answer_bytes": size,
        "kmeta": kmeta,
        "echo": ceiling,
        "kmeta_over_echo": round(kmeta["mb_s"] / ceiling["mb_s"], 3) if ceiling["mb_s"] else None,
    }


def _echo_port(conn: Connection) -> int:
    first = conn.recv()
    return int(first["PLAINTEXT"] if isinstance(first, dict) else first)


# -- targets -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True)
class Target:
    bootstrap: str
    #: kmeta's broker process and its client port (None: the mock)
    broker_pid: int | None = None
    broker_port: int | None = None


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def alternating(rounds: int, sides: dict[str, Callable[[int], dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """``rounds`` produce rounds of each side, taking turns (AB, BA, AB, ...) so that every
    side sees the same neighbours: each side's results, in round order."""
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for i in range(rounds):
        for name in list(sides) if i % 2 == 0 else list(reversed(sides)):
            results[name].append(sides[name](i))
    return results


def produce_rounds(targets: dict[str, Target], a: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``a.rounds`` produce rounds on each target, alternating: per target its median round,
    every round's MB/s, and the failures of all of them."""
    def side(target: Target) -> Callable[[int], dict[str, Any]]:
        return lambda i: _in_process(produce_process, target.bootstrap, a.mb, a.record_bytes, round_topic(i))

    out = {}
    for name, results in alternating(a.rounds, {n: side(t) for n, t in targets.items()}).items():
        by_rate = sorted(results, key=lambda r: r["mb_s"])
        median = dict(by_rate[(len(by_rate) - 1) // 2])  # (an even count: the lower middle)
        median["failed"] = sum(r["failed"] for r in results)
        median["rounds_mb_s"] = [r["mb_s"] for r in results]
        out[name] = median
    return out


def run_target(target: Target, a: argparse.Namespace, produced: dict[str, Any],
               rate: float | None) -> dict[str, Any]:  # fmt: skip
    """Every figure after the produce rounds on one target; the latency at ``rate``
    records/s (None: half this target's median produce rate)."""
    out: dict[str, Any] = {"produce": produced}
    out["consume"] = _in_process(consume_process, target.bootstrap)
    if target.broker_port is not None:
        out["fetch_vs_echo"] = fetch_vs_echo(target.broker_port, a.connections, a.fetch_s)
    if rate is None:
        rate = produced["records_s"] / 2
    out["latency"] = _in_process(latency_process, target.bootstrap, rate, a.latency_s)
    if target.broker_pid:  # idempotent against plain (issue 30: >= 0.9x), acks=all, fresh topics
        def mode(name: str) -> Callable[[int], dict[str, Any]]:
            return lambda i: _in_process(
                produce_process, target.bootstrap, a.mb, a.record_bytes, f"{TOPIC}-{name}-{i}",
                name == "produce_idempotent",
            )  # fmt: skip

        runs = alternating(IDEMPOTENCE_ROUNDS, {n: mode(n) for n in IDEMPOTENCE_MODES})
        for name, results in runs.items():
            out[name] = max(results, key=lambda r: r["mb_s"])  # the least disturbed round
            out[name]["rounds_mb_s"] = [r["mb_s"] for r in results]
    return out


@contextlib.contextmanager
def kmeta_target(a: argparse.Namespace) -> Iterator[Target]:
    from kmeta.testing import Cluster

    with Cluster(brokers=1, partitions=PARTITIONS) as cluster:
        for i in range(a.rounds):
            cluster.create_topic(round_topic(i), PARTITIONS, 1)
        for name in IDEMPOTENCE_MODES:
            for i in range(IDEMPOTENCE_ROUNDS):
                cluster.create_topic(f"{TOPIC}-{name}-{i}", PARTITIONS, 1)
        cluster.wait_converged()
        yield Target(cluster.bootstrap_servers, cluster.pid("broker-1"), cluster.address(1)[1])


@contextlib.contextmanager
def mock_target(a: argparse.Namespace) -> Iterator[Target | str]:
    """librdkafka's mock cluster in a process of its own; a string: why it is skipped."""
    if a.no_peer:
        yield "--no-peer"
        return
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.get_context("spawn").Process(
        target=peer_mock.serve_in_process, args=(child, 1, [round_topic(i) for i in range(a.rounds)])
    )
    proc.start()
    try:
        info = parent.recv()
        yield info["error"] if "error" in info else Target(info["bootstrap"])
    finally:
        parent.send("stop")
        proc.join(10)
        if proc.is_alive():
            proc.kill()


def measure(a: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """kmeta's figures and the mock's, both targets up for the produce rounds."""
    with kmeta_target(a) as kmeta, mock_target(a) as mock:
        assert kmeta.broker_pid is not None
        idle = rss_bytes(kmeta.broker_pid)
        targets = {"kmeta": kmeta} | ({"mock": mock} if isinstance(mock, Target) else {})
        produced = produce_rounds(targets, a)
        time.sleep(0.5)
        held = a.rounds * produced["kmeta"]["bytes"]
        grown = rss_bytes(kmeta.broker_pid) - idle
        ours = run_target(kmeta, a, produced["kmeta"], None)
        ours["memory"] = {
            "idle_rss_bytes": idle,
            "rss_growth_bytes": grown,
            "record_bytes_held": held,
            "rss_growth_per_held_byte": round(grown / held, 3),
        }
        # the mock's latency at kmeta's rate: both at half of kmeta's median produce rate
        rate = ours["latency"]["rate_records_s"]
        theirs = run_target(mock, a, produced["mock"], rate) if isinstance(mock, Target) else {
            "skipped": mock}  # fmt: skip
    return ours, theirs


def ratio(a: dict[str, Any], b: dict[str, Any], *path: str) -> float | None:
    for key in path:
        a, b = a.get(key, {}), b.get(key, {})
    if not isinstance(a, int | float) or not isinstance(b, int | float) or not b:
        return None
    return round(a / b, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=64, help="MiB to produce (and hold)")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--latency-s", type=float, default=5.0)
    parser.add_argument("--fetch-s", type=float, default=3.0)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=PRODUCE_ROUNDS, help="produce rounds a target")
    parser.add_argument("--no-peer", action="store_true", help="skip librdkafka's mock")
    a = parser.parse_args()
    if not peer_mock.available():
        raise SystemExit("confluent-kafka is required (make install)")
    kmeta, mock = measure(a)
    result = {
        "parameters": vars(a),
        "kmeta": kmeta,
        "librdkafka_mock": mock,
        "ratios": {
            "produce_mb_s_kmeta_over_mock": ratio(kmeta, mock, "produce", "mb_s"),
            "consume_mb_s_kmeta_over_mock": ratio(kmeta, mock, "consume", "mb_s"),
            "fetch_mb_s_kmeta_over_echo": kmeta.get("fetch_vs_echo", {}).get("kmeta_over_echo"),
            "latency_p99_kmeta_over_mock": ratio(kmeta, mock, "latency", "p99_ms"),
            "produce_idempotent_over_plain": ratio(
                kmeta.get("produce_idempotent", {}), kmeta.get("produce_plain_acks_all", {}), "mb_s"
            ),
        },
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
