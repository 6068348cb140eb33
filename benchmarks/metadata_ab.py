"""The all-topics Metadata answer's broker CPU, source trees side by side, against the echo floors.

For a regression hunt: each ``--trees LABEL=DIR`` is a checkout (or ``git archive`` export) of
kmeta whose own ``benchmarks/metadata_load.py`` starts its broker, in its own process with
that tree first on the path; the broker is loaded with TOPICS x PARTITIONS through its control
listener (this tree's UpdateMetadata v8). Two echo servers answer a fixed payload of the
broker's all-topics answer size, nothing built: one copying it into the socket, one sending it
by sendfile from a sealed memfd as the broker does (the kernel's floor for the broker's path).
Every target is loaded in turn, round after round (``--rounds``), by the same generators as
``metadata_load.py`` (8 connections x 1 in flight); per target the median server CPU per
answer (user + system), its user part, and each tree's ratio to both echoes (of the medians, and
the median of the ratios within each round), with the load
average at the start and end, as JSON.

    mkdir old-tree && git archive <commit> kmeta benchmarks | tar -x -C old-tree
    .venv/bin/python benchmarks/metadata_ab.py --trees old=old-tree,new=. --rounds 7
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
from multiprocessing.connection import Connection, Listener
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import metadata_load as ml
from echo_server import serve_in_process

from kmeta.net.connection import KafkaConnection

#: run in the broker's process: the tree's own metadata_load.broker_process, told its commands
#: over a multiprocessing connection (address in argv)
_CHILD = """
import sys
from multiprocessing.connection import Client
tree, address = sys.argv[1], sys.argv[2]
sys.path[:0] = [tree, tree + "/benchmarks"]
import metadata_load
metadata_load.broker_process(Client(address))
"""


def start_broker(tree: str, address: str) -> tuple[subprocess.Popen[bytes], Connection, dict[str, int]]:
    listener = Listener(address, "AF_UNIX")
    env = dict(os.environ, PYTHONPATH=tree)
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, tree, address], env=env, cwd=tree)
    conn = listener.accept()
    listener.close()
    return proc, conn, conn.recv()


async def load(ports: dict[str, int], topics: int, partitions: int) -> None:
    conn = await KafkaConnection.open("127.0.0.1", ports["CONTROL"])
    resp = await conn.request(ml.update_request(ports["PLAINTEXT"], topics, partitions), 60)
    assert resp.error_code == 0
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", required=True, help="LABEL=DIR,LABEL=DIR,...")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per target per round")
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--generators", type=int, default=2)
    args = parser.parse_args()
    trees = dict(item.split("=", 1) for item in args.trees.split(","))
    targets: dict[str, tuple[Connection, int]] = {}
    brokers: list[subprocess.Popen[bytes]] = []
    echoes: list[mp.Process] = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, tree in trees.items():
            proc, conn, ports = start_broker(str(Path(tree).resolve()), f"{tmp}/{label}")
            brokers.append(proc)
            asyncio.run(load(ports, args.topics, args.partitions))
            targets[label] = (conn, ports["PLAINTEXT"])
        size = asyncio.run(ml.answer_size(next(iter(targets.values()))[1], ml.request_frame(None)))
        for label, zero_copy in (("echo", False), ("echo_zero_copy", True)):
            here, there = mp.Pipe()
            echo = mp.Process(target=serve_in_process, args=(there, size, zero_copy))
            echo.start()
            echoes.append(echo)
            targets[label] = (here, here.recv()["PLAINTEXT"])
        template = ml.request_frame(None)
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in targets}
        load_start = os.getloadavg()
        for _ in range(args.rounds):
            for key, (end, port) in targets.items():
                runs[key].append(ml.run_load(end, port, template, args.connections, 1, args.duration, args.generators))
        load_end = os.getloadavg()
        for end, _ in targets.values():
            end.send("stop")
        for proc in brokers:
            proc.wait(10)
        for echo in echoes:
            echo.join(10)
    out: dict[str, Any] = {"payload_bytes": size, "rounds": args.rounds, "duration_s": args.duration,
                           "load_average_start": load_start, "load_average_end": load_end}  # fmt: skip
    for key, rs in runs.items():
        cpu = [r["server_cpu_us_per_response"] for r in rs]
        out[key] = {
            "cpu_us_median": statistics.median(cpu), "cpu_us_runs": cpu,
            "user_cpu_us_median": statistics.median(r["server_user_cpu_us_per_response"] for r in rs),
            "req_per_s_median": statistics.median(r["req_per_s"] for r in rs),
        }  # fmt: skip
    for label in trees:
        for echo in ("echo", "echo_zero_copy"):
            out[label][f"to_{echo}"] = round(out[label]["cpu_us_median"] / out[echo]["cpu_us_median"], 3)
            # within each round (the targets ran back to back), then the median of the rounds
            out[label][f"to_{echo}_round_median"] = round(statistics.median(
                b["server_cpu_us_per_response"] / e["server_cpu_us_per_response"] for b, e in zip(runs[label], runs[echo], strict=True)
            ), 3)  # fmt: skip
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
