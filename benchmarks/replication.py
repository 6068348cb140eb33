"""Replication's cost, acks=all against acks=1 on replication factor 3, in one run (issue 29).

    .venv/bin/python benchmarks/replication.py [--peak-s 4] [--record-bytes 1024]
        [--latency-s 8] [--slices 4] [--repeat 2] [--sample-ms 10]

A cluster of 3 brokers and a controller (kmeta.testing.Cluster: processes of their own, file
logs), one topic of 4 partitions, RF 3, min.insync.replicas 2, leaders spread over the brokers.
Every figure is measured for acks=1 and for acks=all in the same run, one after the other,
``--repeat`` times; a ratio is the median of the repeats' ratios (a shared, loaded machine
moves absolute figures, much less a ratio measured within minutes). The issue's goals:

* ``throughput_mb_s``: a real producer (confluent-kafka, librdkafka) in a process of its own
  sends ``--record-bytes`` records as fast as it can for ``--peak-s`` seconds (``linger.ms``
  5, ``batch.size`` 1 MiB, no compression, idempotence off, a 32 MiB queue), then flushes;
  MB/s from the first ``produce()`` to the end of ``flush()`` (every record acknowledged).
  Each repeat runs acks=1, acks=all, acks=1, acks=all and takes each one's better run as its
  peak (the other's load moves both alike). acks=all ÷ acks=1 >= 0.5.

  The peak is a sustained one, timed, not a fixed amount: an earlier version sent 24 MiB,
  which took ~0.1 s (220 MB/s) — a burst the producer's and the sockets' buffers and the
  first appends absorb, several times what the 3 brokers sustain while replicating. Half
  that "peak" was at or past the cluster's sustained capacity, so the latency runs measured
  a queue growing near saturation (p99s of 0.1-0.9 s), not the cost of acks=all. A window
  of a few seconds (``--peak-s``) is dominated by the steady state, and the bounded queue
  keeps the flush after it short, so a run stops by itself in about ``--peak-s`` seconds.
* ``ack_ms``: a producer at half the acks=1 peak rate (records/s, the same rate for both) for
  ``--latency-s`` s, each value carrying its send time: produce() -> delivery report, p50 /
  p99. The acks=all p99 <= 2x the acks=1 p99. The latency runs of a repeat are taken in
  ``--slices`` slices in turn (acks=1, acks=all, acks=all at its own half; then backwards;
  ...), a new producer each, and each one's percentiles are over all its slices: on a shared
  box the neighbours' load comes and goes within seconds, and one run after the other gave
  acks=1 a quiet minute and acks=all a loaded one (acks=1's p50 ranged 6-480 ms over the
  repeats of one run). Half the acks=1 peak is most of the acks=all
  peak when their throughput ratio is near 0.5, so acks=all is also measured at half its own
  peak (``acks_all_at_half_its_peak``: the cost of waiting for the followers, without the
  queueing of a producer near saturation).
* ``follower_lag``: during each latency run the script asks every broker for its own log end
  of every partition every ``--sample-ms`` (ListOffsets latest as Kafka's debugging replica
  id -2, which a follower answers too). A follower's lag at a sample is how long ago the
  leader's log end first passed the follower's (0 when it holds all the leader had; the
  resolution is the sampling interval), and in records the leader's log end minus its own:
  p50 / p99 / max over the samples taken while records were arriving.
* ``brokers``: with each run, the 3 brokers' CPU seconds and the seconds they were runnable
  but waited for a CPU (``/proc/<pid>/task/*/schedstat``, Linux): how contended the run was.
  acks=all's answer needs the leader, then each follower, then the leader again to get a
  CPU in turn, where acks=1's needs the leader once, so a box where the brokers wait for a
  CPU as long as they run stretches acks=all's tail several times more than acks=1's.

Prints one JSON object, with the load average at start and end.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import multiprocessing
import os
import statistics
import struct
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import list_offsets as lo
from kmeta.testing import Cluster

TOPIC = "replicated"
PARTITIONS = 4
#: ListOffsetsRequest.DEBUGGING_REPLICA_ID: a follower answers with its own log end
DEBUGGING_REPLICA_ID = -2
#: the throughput producer's queue (KiB): enough to keep 4 partitions' 1 MiB batches in
#: flight, small enough that the flush after the timed window is short
THROUGHPUT_QUEUE_KBYTES = 32 * 1024


def _producer(bootstrap: str, acks: str, queue_kbytes: int = 256 * 1024) -> Any:
    from confluent_kafka import Producer

    return Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.size": 1 << 20,
        "compression.type": "none", "enable.idempotence": False,
        "queue.buffering.max.kbytes": queue_kbytes, "log_level": 0,
    })  # fmt: skip


def throughput_process(conn: Connection, bootstrap: str, acks: str, seconds: float, record_bytes: int) -> None:
    """Send records as fast as the producer takes them for ``seconds``, then flush; MB/s from
    the first ``produce()`` to the last acknowledgement. The producer's queue is bounded
    (``THROUGHPUT_QUEUE_KBYTES``), so it fills within the first few ms and from then on the
    producer only takes what the brokers acknowledge: the figure is the brokers' sustained
    rate, and the flush after ``seconds`` takes one queue's worth at most."""
    producer = _producer(bootstrap, acks, THROUGHPUT_QUEUE_KBYTES)
    value = os.urandom(record_bytes)
    failed = 0

    def report(err: Any, _msg: Any) -> None:
        nonlocal failed
        failed += err is not None

    producer.list_topics(TOPIC, timeout=10)
    start = time.perf_counter()
    count = 0
    while time.perf_counter() - start < seconds:
        for _ in range(256):  # (the clock read once per 256 records)
            try:
                producer.produce(TOPIC, value, partition=count % PARTITIONS, on_delivery=report)
            except BufferError:
                producer.poll(0.005)
                break
            count += 1
    produced_s = time.perf_counter() - start
    left = producer.flush(120)
    elapsed = time.perf_counter() - start
    conn.send({
        "records": count, "seconds": round(elapsed, 3), "producing_s": round(produced_s, 3),
        "mb_s": round(count * record_bytes / elapsed / 1e6, 1), "records_s": round(count / elapsed),
        "failed": failed + left,
    })  # fmt: skip


def latency_process(conn: Connection, bootstrap: str, acks: str, rate: float, seconds: float, record_bytes: int) -> None:
    """Produce at ``rate`` records/s with the send time in each value; each delivery report
    gives one ack latency. Reports them all (ms), with the counts."""
    producer = _producer(bootstrap, acks)
    producer.list_topics(TOPIC, timeout=10)
    acked: list[float] = []
    failed = 0

    def report(err: Any, msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1
        else:
            acked.append((time.perf_counter() - struct.unpack_from(">d", msg.value(), 1)[0]) * 1000)

    pad = os.urandom(max(0, record_bytes - 9))
    conn.send("started")
    start = time.perf_counter()
    sent = 0
    while (now := time.perf_counter()) - start < seconds:
        due = int((now - start) * rate)
        while sent < due:
            value = b"L" + struct.pack(">d", time.perf_counter()) + pad
            try:
                producer.produce(TOPIC, value, partition=sent % PARTITIONS, on_delivery=report)
            except BufferError:
                break
            sent += 1
        producer.poll(0.001)
    left = producer.flush(60)
    conn.send({"sent": sent, "failed": failed + left, "acked_ms": acked})


def pct(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))]


# -- follower lag ------------------------------------------------------------------------------
async def _log_ends(conn: KafkaConnection) -> tuple[float, dict[int, int]]:
    request = lo.ListOffsetsRequest(
        version=4, replica_id=DEBUGGING_REPLICA_ID,
        topics=(lo.ListOffsetsTopic(TOPIC, tuple(lo.ListOffsetsPartition(p, -1, -1) for p in range(PARTITIONS))),),
    )  # fmt: skip
    answer = await conn.request(request, 10.0)
    at = time.perf_counter()
    return at, {p.partition_index: p.offset for t in answer.topics for p in t.partitions if p.error_code == 0}


async def sample_log_ends(
    cluster: Cluster, leaders: dict[int, int], sample_s: float, done: Connection
) -> dict[str, list[Any]]:
    """Every broker's log ends every ``sample_s`` until ``done`` has something to read; the
    followers' lag behind their leaders over the samples taken while records arrived."""
    conns = {b: await KafkaConnection.open(*cluster.address(b)) for b in cluster.broker_ids}
    # per partition: the leader's (time, log end) history, and (time, follower, log end)
    leader_ends: dict[int, list[tuple[float, int]]] = {p: [] for p in leaders}
    follower_ends: dict[int, list[tuple[float, int]]] = {p: [] for p in leaders}
    try:
        while not done.poll(0):
            answers = await asyncio.gather(*(_log_ends(c) for c in conns.values()))
            for broker, (at, ends) in zip(conns, answers, strict=True):
                for p, end in ends.items():
                    (leader_ends if leaders[p] == broker else follower_ends)[p].append((at, end))
            await asyncio.sleep(sample_s)
    finally:
        for c in conns.values():
            c.close()
    lag_ms: list[float] = []
    lag_records: list[int] = []
    for p, history in leader_ends.items():
        moved = [t for (t, e), (_, before) in zip(history[1:], history, strict=False) if e > before]
        if not moved:
            continue
        first, last = moved[0], moved[-1]
        times = [t for t, _ in history]
        ends = [e for _, e in history]
        for at, end in follower_ends[p]:
            if not first <= at <= last:
                continue
            latest = ends[max(0, bisect.bisect_right(times, at) - 1)]
            lag_records.append(max(0, latest - end))
            # when the leader's log end first passed this follower's (ends only grow)
            passed = bisect.bisect_right(ends, end)
            lag_ms.append(max(0.0, (at - times[passed]) * 1000) if passed < len(times) and times[passed] <= at else 0.0)
    return {"lag_ms": lag_ms, "lag_records": lag_records}


# -- the run -----------------------------------------------------------------------------------
def _spawn(target: Any, *args: Any) -> tuple[Any, Connection]:
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.get_context("spawn").Process(target=target, args=(child, *args), daemon=True)
    proc.start()
    return proc, parent


def _result(proc: Any, parent: Connection, timeout_s: float) -> Any:
    try:
        if not parent.poll(timeout_s):
            raise TimeoutError(f"no result in {timeout_s} s")
        return parent.recv()
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()


def _scheduled(cluster: Cluster) -> tuple[float, float] | None:
    """The brokers' CPU seconds and seconds spent runnable but waiting for a CPU, summed over
    their threads (``/proc/<pid>/task/*/schedstat``); None where there is no such file."""
    on_cpu = waiting = 0
    try:
        for broker in cluster.broker_ids:
            pid = cluster.pid(f"broker-{broker}")
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                    ran, waited, _ = map(int, f.read().split())
                on_cpu += ran
                waiting += waited
    except (OSError, ValueError):  # (not Linux, or a thread gone while read)
        return None
    return on_cpu / 1e9, waiting / 1e9


def _brokers_since(cluster: Cluster, before: tuple[float, float] | None) -> dict[str, float] | None:
    after = _scheduled(cluster)
    if before is None or after is None:
        return None
    return {"cpu_s": round(after[0] - before[0], 2), "runqueue_wait_s": round(after[1] - before[1], 2)}


def throughput(cluster: Cluster, acks: str, a: argparse.Namespace) -> dict[str, Any]:
    bootstrap = cluster.client_config()["bootstrap.servers"]
    before = _scheduled(cluster)
    proc, parent = _spawn(throughput_process, bootstrap, acks, a.peak_s, a.record_bytes)
    result = dict(_result(proc, parent, a.peak_s + 180))
    result["brokers"] = _brokers_since(cluster, before)
    return result


def latency(
    cluster: Cluster, leaders: dict[int, int], acks: str, rate: float, seconds: float, a: argparse.Namespace
) -> dict[str, Any]:  # fmt: skip
    """One slice: a producer at ``rate`` for ``seconds`` while the log ends are sampled."""
    bootstrap = cluster.client_config()["bootstrap.servers"]
    before = _scheduled(cluster)
    proc, parent = _spawn(latency_process, bootstrap, acks, rate, seconds, a.record_bytes)
    if not parent.poll(60) or parent.recv() != "started":
        raise TimeoutError("the latency producer did not start")
    lag = asyncio.run(sample_log_ends(cluster, leaders, a.sample_ms / 1000, parent))
    ack = _result(proc, parent, seconds + 120)
    return {**ack, **lag, "brokers": _brokers_since(cluster, before)}


def latency_runs(
    cluster: Cluster, leaders: dict[int, int], runs: list[tuple[str, str, float]], a: argparse.Namespace
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Each run (name, acks, rate) for ``--latency-s`` in all, as ``--slices`` slices taken in
    turn (ABC CBA ABC ...), so that each sees the same mix of the neighbours' load."""
    pooled: dict[str, dict[str, Any]] = {
        name: {"sent": 0, "failed": 0, "acked_ms": [], "lag_ms": [], "lag_records": [], "cpu_s": 0.0, "wait_s": 0.0}
        for name, _, _ in runs
    }  # fmt: skip
    for i in range(a.slices):
        for name, acks, rate in runs if i % 2 == 0 else runs[::-1]:
            one = latency(cluster, leaders, acks, rate, a.latency_s / a.slices, a)
            into = pooled[name]
            for key in ("sent", "failed", "acked_ms", "lag_ms", "lag_records"):
                into[key] += one[key]
            if one["brokers"] is not None:
                into["cpu_s"] += one["brokers"]["cpu_s"]
                into["wait_s"] += one["brokers"]["runqueue_wait_s"]
    rates = {name: rate for name, _, rate in runs}
    return {name: _summary(p, rates[name], a.slices) for name, p in pooled.items()}


def _summary(p: dict[str, Any], rate: float, slices: int) -> dict[str, Any]:
    acked, lag_ms, lag_records = sorted(p["acked_ms"]), sorted(p["lag_ms"]), sorted(p["lag_records"])
    return {
        "ack_ms": {
            "rate_records_s": round(rate), "slices": slices, "sent": p["sent"], "acknowledged": len(acked),
            "failed": p["failed"], "p50": round(pct(acked, 50), 2), "p99": round(pct(acked, 99), 2),
            "max": round(acked[-1], 2) if acked else None,
        },
        "follower_lag": {
            "samples": len(lag_ms),
            "lag_ms": {"p50": round(pct(lag_ms, 50), 2), "p99": round(pct(lag_ms, 99), 2), "max": round(lag_ms[-1], 2) if lag_ms else None},
            "lag_records": {"p50": pct(lag_records, 50), "p99": pct(lag_records, 99), "max": lag_records[-1] if lag_records else None},
        },
        "brokers": {"cpu_s": round(p["cpu_s"], 2), "runqueue_wait_s": round(p["wait_s"], 2)} if p["cpu_s"] else None,
    }  # fmt: skip


def ratio(a: float | None, b: float | None) -> float | None:
    return None if not a or not b else round(a / b, 3)


def run(a: argparse.Namespace) -> dict[str, Any]:
    repeats: list[dict[str, Any]] = []
    with Cluster(3, log_level="WARNING") as cluster:
        cluster.create_topic(TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2"})
        view = cluster.metadata(1)
        leaders = {p: view.leader(TOPIC, p) for p in range(PARTITIONS)}
        for _ in range(a.repeat):
            runs = [(acks, throughput(cluster, acks, a)) for _ in range(2) for acks in ("1", "all")]
            one = max((r for acks, r in runs if acks == "1"), key=lambda r: r["mb_s"])
            every = max((r for acks, r in runs if acks == "all"), key=lambda r: r["mb_s"])
            one["runs_mb_s"] = [r["mb_s"] for acks, r in runs if acks == "1"]
            every["runs_mb_s"] = [r["mb_s"] for acks, r in runs if acks == "all"]
            rate = one["records_s"] / 2
            runs_at = [("acks_1", "1", rate), ("acks_all", "all", rate), ("acks_all_at_half_its_peak", "all", every["records_s"] / 2)]
            lat = latency_runs(cluster, leaders, runs_at, a)
            lat_one, lat_all, lat_own = lat["acks_1"], lat["acks_all"], lat["acks_all_at_half_its_peak"]
            repeats.append({
                "throughput": {"acks_1": one, "acks_all": every},
                "latency_at_half_peak": {"acks_1": lat_one, "acks_all": lat_all, "acks_all_at_half_its_peak": lat_own},
                "ratios": {
                    "throughput_all_vs_1": ratio(every["mb_s"], one["mb_s"]),
                    "ack_p99_all_vs_1": ratio(lat_all["ack_ms"]["p99"], lat_one["ack_ms"]["p99"]),
                    "ack_p99_all_at_half_its_peak_vs_1": ratio(lat_own["ack_ms"]["p99"], lat_one["ack_ms"]["p99"]),
                },
            })  # fmt: skip
    def median(key: str) -> float | None:
        values = [r["ratios"][key] for r in repeats if r["ratios"][key] is not None]
        return round(statistics.median(values), 3) if values else None

    return {
        "parameters": {k: getattr(a, k) for k in ("peak_s", "record_bytes", "latency_s", "slices", "repeat", "sample_ms")},
        "leaders": leaders,
        "repeats": repeats,
        "ratios": {
            "throughput_all_vs_1": median("throughput_all_vs_1"),  # goal >= 0.5
            "ack_p99_all_vs_1": median("ack_p99_all_vs_1"),  # goal <= 2
            "ack_p99_all_at_half_its_peak_vs_1": median("ack_p99_all_at_half_its_peak_vs_1"),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peak-s", type=float, default=4.0)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--latency-s", type=float, default=8.0)
    parser.add_argument("--slices", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--sample-ms", type=float, default=10.0)
    args = parser.parse_args()
    load_before = os.getloadavg()
    started = time.monotonic()
    result = run(args)
    result["seconds"] = round(time.monotonic() - started, 1)
    result["load_average"] = {"start": load_before, "end": os.getloadavg()}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
