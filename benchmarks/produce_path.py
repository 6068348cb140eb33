"""The broker's Produce path in one process, this tree's against another's: CPU ms per MB.

    .venv/bin/python benchmarks/produce_path.py --vs-tree DIR [--rounds 6] [--dir /dev/shm]

What ``produce_cpu.py`` measures through a whole cluster and a real producer, without the
producer and the cluster beside it, so the load of a shared machine moves it less: a real
:class:`~kmeta.net.inbound.server_connection.ServerConnection` (the registry's handlers, a broker
state given its partition as the controller gives it, a file log in ``--dir``) fed 64
Produce v10 requests of one ~1 MiB batch (1000 records of 1 KiB, as librdkafka sends them with
``data_plane.py``'s config), each in 256 KiB reads that are fresh ``bytes`` as uvloop hands
them over. The process's CPU time over the feeding, per MB of records: the frame splitter, the
request's parse, the handler's checks, the log's append and its write (no fsync), the answer's
encoding. What is not in it: the kernel's socket receive and send, the event loop.

Each round runs one process per tree (``PYTHONPATH`` the tree), three passes each on a fresh
log, the trees' order alternating; medians of the passes, and the median of this tree / the
other per pass pair.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import asyncio, json, os, shutil, sys, tempfile, time, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, os.getcwd())
from tests.server.data_plane import batch, holding, produce
from tests.server.helpers import ConnectionPair

READ = 256 * 1024

async def main(requests, where, passes):
    records = batch(1000, value=os.urandom(1024).replace(b"%", b"x"))
    out = []
    for _ in range(passes):
        log_dir = tempfile.mkdtemp(dir=where)
        try:
            pair = ConnectionPair(holding(log_dir=log_dir))
            frames = [pair.encode(produce("orders", 0, records, acks=1, version=10)) for _ in range(requests)]
            feed = pair.server.data_received
            start = time.process_time()
            for f in frames:
                for i in range(0, len(f), READ):
                    feed(f[i:i + READ])
            spent = time.process_time() - start
            assert len(pair.transport.written) >= requests
            out.append(spent * 1e3 / (requests * len(records) / 1e6))
        finally:
            shutil.rmtree(log_dir)
    print(json.dumps(out))

asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
"""


def _passes(tree: Path, requests: int, where: str, passes: int) -> list[float]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(requests), where, str(passes)],
        cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"{tree}: {done.stderr}")
    return [float(x) for x in json.loads(done.stdout)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vs-tree", type=Path, required=True, help="an export of another revision")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--requests", type=int, default=64, help="~1 MiB requests per pass")
    parser.add_argument("--dir", default="/dev/shm", help="where the logs go")
    a = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    load_start = os.getloadavg()
    rows: dict[str, list[float]] = {"this": [], "vs_tree": []}
    for i in range(a.rounds):
        sides = [("this", here), ("vs_tree", a.vs_tree.resolve())]
        for side, tree in sides if i % 2 == 0 else reversed(sides):
            rows[side] += _passes(tree, a.requests, a.dir, 3)
    pairs = [x / y for x, y in zip(rows["this"], rows["vs_tree"], strict=True)]
    print(json.dumps({
        "parameters": {**vars(a), "vs_tree": str(a.vs_tree)},
        "ms_per_mb_median": {k: round(statistics.median(v), 3) for k, v in rows.items()},
        "this_over_vs_tree": round(statistics.median(pairs), 3),
        "passes": {k: [round(x, 3) for x in v] for k, v in rows.items()},
        "load_average": {"start": [round(x, 2) for x in load_start],
                         "end": [round(x, 2) for x in os.getloadavg()]},
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
