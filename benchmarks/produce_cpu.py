"""data_plane.py's produce, on kmeta and librdkafka's mock alternately: wall MB/s and CPU per MB.

    .venv/bin/python benchmarks/produce_cpu.py [--mb 128] [--rounds 5] [--no-peer]
        [--vs-tree DIR] [--pin]

The same producer as ``data_plane.produce_process`` (confluent-kafka, acks=1, linger.ms 5,
batch.size 1 MiB, 1 KiB records, 4 partitions, one broker; the same config on both sides),
``--rounds`` rounds on each target, alternating so both see the same neighbours. Beside the
wall MB/s, what the load on a shared machine moves much less:

* ``broker_ms_per_mb``: the broker's CPU per MB produced. kmeta: the broker process's tasks'
  on-CPU time (``/proc/<pid>/task/*/schedstat``, ns) over the timed part alone (from the
  producer's first ``produce()`` to the end of its ``flush()``). The mock: its process's
  ``os.times()`` over the round (its cluster is C threads in that process; idle, it costs
  nothing measurable).
* ``client_ms_per_mb``: the producer process's own CPU (librdkafka's threads and the Python
  loop) per MB, on each target.

``--vs-tree DIR`` (an export of another revision, e.g. ``git archive main | tar -x -C DIR``)
adds a second kmeta cluster whose daemons run that tree's code (``PYTHONPATH``), up at the same
time, its rounds interleaved with this tree's: a before/after of a change under the same load
(``kmeta_vs_tree``, and the median of this tree's broker CPU / that tree's per pair).

On a box whose cores the producer and the broker share, throughput ~ cores / (client + broker
CPU per MB): the figure that says how far the broker's share can move the wall ratio.
``--pin`` gives the producer a core of its own (CPU 0) and everything else (kmeta's daemons,
the mock) the other (CPU 1), as a producer on a machine of its own would have; the wall MB/s
is then the client's bound on either target, unless a server cannot keep up with it.
Prints one JSON object: per round, medians, and the median of kmeta / mock per pair.
"""

from __future__ import annotations

import argparse
import glob
import json
import multiprocessing
import os
import statistics
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import data_plane
import peer_mock


def _task_cpu_ns(pid: int) -> int:
    return sum(
        int(Path(f).read_text().split()[0]) for f in glob.glob(f"/proc/{pid}/task/*/schedstat")
    )


class _Reporter:
    """``produce_process``'s pipe: tells the parent when the timed part starts (its first
    clock read after the topic's metadata), and adds this process's CPU to the result."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def send(self, result: dict[str, Any]) -> None:
        t = os.times()
        result["client_cpu_s"] = t.user + t.system
        self.conn.send(result)


#: --pin: the producer's CPU, and the one everything else runs on
CLIENT_CPUS, SERVER_CPUS = {0}, {1}


def produce_marked(conn: Connection, bootstrap: str, mb: int, topic: str, pin: bool) -> None:
    if pin:
        os.sched_setaffinity(0, CLIENT_CPUS)
    clock = time.perf_counter
    started = False

    def marked() -> float:
        nonlocal started
        if not started:  # (produce_process reads the clock first right before its loop)
            started = True
            conn.send("start")
        return clock()

    time.perf_counter = marked  # type: ignore[assignment]
    data_plane.produce_process(_Reporter(conn), bootstrap, mb, 1024, topic)  # type: ignore[arg-type]


def _broker_cpu(pid: int) -> Any:
    return lambda: _task_cpu_ns(pid) / 1e9


def produce_round(bootstrap: str, mb: int, topic: str, cpu: Any, pin: bool = False) -> dict[str, Any]:
    """One producer run; ``cpu()`` reads the broker's CPU seconds."""
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.get_context("spawn").Process(
        target=produce_marked, args=(child, bootstrap, mb, topic, pin)
    )
    proc.start()
    try:
        if not parent.poll(120) or parent.recv() != "start":
            raise TimeoutError("the producer did not start")
        before = cpu()
        if not parent.poll(300):
            raise TimeoutError("the producer gave no result")
        result: dict[str, Any] = parent.recv()
        spent = cpu() - before
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    mb_sent = result["bytes"] / 1e6
    return {
        "mb_s": result["mb_s"],
        "broker_ms_per_mb": round(spent * 1e3 / mb_sent, 3),
        "client_ms_per_mb": round(result["client_cpu_s"] * 1e3 / mb_sent, 3),
        "failed": result["failed"],
    }


def _medians(rows: list[dict[str, Any]]) -> dict[str, float]:
    keys = ("mb_s", "broker_ms_per_mb", "client_ms_per_mb")
    return {k: round(statistics.median(r[k] for r in rows), 3) for k in keys}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=128, help="MiB per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-peer", action="store_true", help="kmeta only")
    parser.add_argument("--vs-tree", type=Path, help="a second kmeta cluster on this tree's code")
    parser.add_argument("--pin", action="store_true", help="the producer on CPU 0, the rest on 1")
    a = parser.parse_args()
    if a.vs_tree is not None:
        return _vs_tree(a)
    from kmeta.testing import Cluster

    if a.pin:  # (inherited by the daemons and the mock started below)
        if not os.sched_getaffinity(0) >= CLIENT_CPUS | SERVER_CPUS:
            raise SystemExit("--pin needs CPUs 0 and 1 (this process may not run on both)")
        os.sched_setaffinity(0, SERVER_CPUS)

    load_start = os.getloadavg()
    names = [f"{data_plane.TOPIC}-cpu-{i}" for i in range(a.rounds)]
    kmeta: list[dict[str, Any]] = []
    mock: list[dict[str, Any]] = []
    parent, child = multiprocessing.Pipe()
    peer = None
    if not a.no_peer:
        peer = multiprocessing.get_context("spawn").Process(
            target=peer_mock.serve_in_process, args=(child, 1, names)
        )
        peer.start()
        info = parent.recv()
        if "error" in info:
            raise SystemExit(info["error"])

    def mock_cpu() -> float:
        parent.send("cpu")
        user, system = parent.recv()
        return float(user + system)

    try:
        with Cluster(brokers=1, partitions=data_plane.PARTITIONS) as cluster:
            for name in names:
                cluster.create_topic(name, data_plane.PARTITIONS, 1)
            cluster.wait_converged()
            pid = cluster.pid("broker-1")
            for name in names:
                kmeta.append(produce_round(cluster.bootstrap_servers, a.mb, name, _broker_cpu(pid), a.pin))
                if peer is not None:
                    mock.append(produce_round(info["bootstrap"], a.mb, name, mock_cpu, a.pin))
    finally:
        if peer is not None:
            parent.send("stop")
            peer.join(10)
    out: dict[str, Any] = {
        "parameters": vars(a),
        "kmeta": {"median": _medians(kmeta), "rounds": kmeta},
    }
    if mock:
        out["librdkafka_mock"] = {"median": _medians(mock), "rounds": mock}
        out["produce_mb_s_kmeta_over_mock"] = round(
            statistics.median(k["mb_s"] / m["mb_s"] for k, m in zip(kmeta, mock, strict=True)), 3
        )
    out["load_average"] = {"start": [round(x, 2) for x in load_start],
                           "end": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip
    print(json.dumps(out, indent=2))


def _vs_tree(a: argparse.Namespace) -> None:
    from kmeta.testing import Cluster

    load_start = os.getloadavg()
    names = [f"{data_plane.TOPIC}-cpu-{i}" for i in range(a.rounds)]
    here = str(Path(__file__).resolve().parent.parent)
    rows: dict[str, list[dict[str, Any]]] = {"kmeta": [], "kmeta_vs_tree": []}
    clusters: dict[str, Any] = {}
    saved = os.environ.get("PYTHONPATH")
    try:
        for side, path in (("kmeta", here), ("kmeta_vs_tree", str(a.vs_tree.resolve()))):
            os.environ["PYTHONPATH"] = path  # (what the cluster's daemons are spawned with)
            cluster = clusters[side] = Cluster(brokers=1, partitions=data_plane.PARTITIONS)
            cluster.__enter__()
            for name in names:
                cluster.create_topic(name, data_plane.PARTITIONS, 1)
            cluster.wait_converged()
        for i, name in enumerate(names):  # (alternating which goes first)
            for side in list(rows) if i % 2 == 0 else list(reversed(rows)):
                cluster = clusters[side]
                rows[side].append(produce_round(
                    cluster.bootstrap_servers, a.mb, name, _broker_cpu(cluster.pid("broker-1"))
                ))  # fmt: skip
    finally:
        for cluster in clusters.values():
            cluster.__exit__(None, None, None)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    out: dict[str, Any] = {
        "parameters": {**vars(a), "vs_tree": str(a.vs_tree)},
        **{side: {"median": _medians(r), "rounds": r} for side, r in rows.items()},
        "broker_cpu_over_vs_tree": round(
            statistics.median(
                k["broker_ms_per_mb"] / v["broker_ms_per_mb"]
                for k, v in zip(rows["kmeta"], rows["kmeta_vs_tree"], strict=True)
            ),
            3,
        ),
        "load_average": {
            "start": [round(x, 2) for x in load_start],
            "end": [round(x, 2) for x in os.getloadavg()],
        },
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
