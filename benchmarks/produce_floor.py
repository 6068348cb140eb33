"""The CPU per MB a durable broker cannot avoid on produce: the kernel's two copies.

    .venv/bin/python benchmarks/produce_floor.py [--mb 128] [--rounds 5] [--dir DIR]

What bounds issue 28's produce ratio (``produce_cpu.py``: kmeta's broker CPU per MB against
librdkafka's mock cluster, which keeps the last 5 MB of a partition in memory): a broker that
did nothing in user space would still

* receive the bytes from a loopback TCP socket: ``recv_into`` one preallocated 1 MiB buffer,
  the cheapest read Python has (the kernel's copy to user space and the syscalls), from a
  child process sending 1 MiB at a time;
* write them into a log file: ``os.pwrite`` of 1 MiB at a time into a fresh file in ``--dir``
  (default the system temp dir, where the benchmark clusters keep their state and logs),
  without fsync, as kmeta's log does (the page cache copy, block reservations, and the
  reclaim of old page-cache pages when memory is full of them).

Each is this process's CPU (user + system) over the transfer, per MB; ``--rounds`` rounds,
medians. The sum is the floor under kmeta's broker CPU per MB; the mock does the first and
not the second.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import statistics
import tempfile
import time
from typing import Any

CHUNK = 1 << 20


def _cpu() -> float:
    return time.process_time()  # (user + system, at ns resolution: os.times() ticks 10 ms)


def _send(port: int, mb: int) -> None:
    data = os.urandom(CHUNK)
    with socket.create_connection(("127.0.0.1", port)) as s:
        for _ in range(mb):
            s.sendall(data)


def receive_round(mb: int) -> float:
    """CPU ms per MB of receiving ``mb`` MiB from another process over loopback."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        sender = multiprocessing.get_context("spawn").Process(
            target=_send, args=(server.getsockname()[1], mb)
        )
        sender.start()
        conn, _ = server.accept()
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        left = mb * CHUNK
        with conn:
            first = conn.recv_into(view)  # (the clock starts once the sender is sending)
            left -= first
            start = _cpu()
            while left > 0:
                n = conn.recv_into(view)
                if n == 0:
                    raise ConnectionError("the sender closed early")
                left -= n
            spent = _cpu() - start
        sender.join(30)
    return spent * 1e3 / ((mb * CHUNK - first) / 1e6)


def write_round(mb: int, directory: str) -> float:
    """CPU ms per MB of writing ``mb`` MiB into a fresh file in ``directory`` (no fsync)."""
    data = os.urandom(CHUNK)
    fd, path = tempfile.mkstemp(dir=directory, suffix=".log")
    try:
        start = _cpu()
        for i in range(mb):
            os.pwrite(fd, data, i * CHUNK)
        spent = _cpu() - start
    finally:
        os.close(fd)
        os.unlink(path)
    return spent * 1e3 / (mb * CHUNK / 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=128, help="MiB per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the log file goes")
    a = parser.parse_args()
    load_start = os.getloadavg()
    rows: dict[str, list[float]] = {"recv_ms_per_mb": [], "write_ms_per_mb": []}
    for _ in range(a.rounds):  # (alternating, so both see the same neighbours)
        rows["recv_ms_per_mb"].append(round(receive_round(a.mb), 3))
        rows["write_ms_per_mb"].append(round(write_round(a.mb, a.dir), 3))
    medians = {k: round(statistics.median(v), 3) for k, v in rows.items()}
    out: dict[str, Any] = {
        "parameters": vars(a),
        "median": {**medians, "floor_ms_per_mb": round(sum(medians.values()), 3)},
        "rounds": rows,
        "load_average": {
            "start": [round(x, 2) for x in load_start],
            "end": [round(x, 2) for x in os.getloadavg()],
        },
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
