"""Start-up and teardown of a 3-broker test cluster: kmeta.testing.Cluster beside librdkafka's mock.

    python benchmarks/fixture.py [--runs 10] [--brokers 3]

Each run, in this (the test's) process, interleaved so both see the same machine load:

* kmeta: ``Cluster(brokers).start()`` until every broker's Metadata lists every broker (a
  controller and N broker processes), then ``close()``; the phases of the slowest daemon are
  read from the daemons' own logs: process start to the listener bound (interpreter start and
  imports), to the broker registered with the controller, to ready (its first full
  UpdateMetadata reached every broker);
* librdkafka mock (``test.mock.num.brokers``, benchmarks/peer_mock.py): a client whose mock
  cluster answers Metadata with every broker, then the client destroyed;
* the CPU and wall time of one ``python -c "import kmeta.cli.daemons.broker"`` (the per-daemon cost).

Prints one JSON object: medians, every run, and the load average beside each run (the machine
is shared; a figure means little without it). Targets (issue 18): ready <= 1.5 s median at
load <= 2, teardown <= 0.5 s.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peer_mock

from kmeta.testing import Cluster

READY_TARGET_S = 1.5
TEARDOWN_TARGET_S = 0.5
_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
#: log lines that end a phase (the daemons log at INFO)
_BOUND = re.compile(r"listener (PLAINTEXT|CONTROLLER) on ")
_REGISTERED = re.compile(r"broker \d+ registered with epoch")


def _first(path: Path, pattern: re.Pattern[str]) -> float | None:
    """Wall time of the first log line matching ``pattern``."""
    for line in path.read_text(errors="replace").splitlines():
        m = _LINE.match(line)
        if m and pattern.search(line):
            return dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return None


def kmeta_run(brokers: int) -> dict[str, Any]:
    cluster = Cluster(brokers, log_level="INFO")
    t0_wall, t0 = time.time(), time.perf_counter()
    cluster.start()
    ready_s = time.perf_counter() - t0
    bound = [_first(cluster.log_path(n), _BOUND) for n in cluster.daemons]
    registered = [_first(cluster.log_path(f"broker-{i}"), _REGISTERED) for i in cluster.broker_ids]
    t1 = time.perf_counter()
    cluster.close()
    teardown_s = time.perf_counter() - t1
    phases = None
    if None not in bound and None not in registered:
        slowest_bound = max(b for b in bound if b is not None) - t0_wall
        slowest_registered = max(r for r in registered if r is not None) - t0_wall
        phases = {
            "start_to_listening_ms": round(1000 * slowest_bound),
            "listening_to_registered_ms": round(1000 * (slowest_registered - slowest_bound)),
            "registered_to_ready_ms": round(1000 * (ready_s - slowest_registered)),
        }
    return {"ready_s": round(ready_s, 3), "teardown_s": round(teardown_s, 3), "phases": phases}


def mock_run(brokers: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    client, nodes = peer_mock.start_mock(brokers, [])
    ready_s = time.perf_counter() - t0
    assert len(nodes) == brokers
    t1 = time.perf_counter()
    del client  # destroying the client stops its mock cluster
    return {"ready_s": round(ready_s, 3), "teardown_s": round(time.perf_counter() - t1, 3)}


def import_cost() -> dict[str, float]:
    before = os.times()
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import kmeta.cli.daemons.broker"], check=True, timeout=60)
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return {"wall_s": round(time.perf_counter() - t0, 3), "cpu_s": round(cpu, 3)}


def median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--no-peer", action="store_true", help="skip librdkafka's mock")
    a = ap.parse_args()
    if a.runs < 1 or a.brokers < 1:
        raise SystemExit("--runs and --brokers must be >= 1")
    with_peer = not a.no_peer and peer_mock.available()
    runs: list[dict[str, Any]] = []
    for _ in range(a.runs):
        run: dict[str, Any] = {"load_average_1m": round(os.getloadavg()[0], 2)}
        run["kmeta"] = kmeta_run(a.brokers)
        if with_peer:
            run["librdkafka_mock"] = mock_run(a.brokers)
        run["import_kmeta_cli_broker"] = import_cost()
        runs.append(run)

    def med(target: str, key: str) -> float:
        return median([r[target][key] for r in runs])

    kmeta = {"ready_s": med("kmeta", "ready_s"), "teardown_s": med("kmeta", "teardown_s")}
    phased = [r["kmeta"]["phases"] for r in runs if r["kmeta"]["phases"]]
    if phased:
        kmeta["phases_ms"] = {k: round(statistics.median(p[k] for p in phased)) for k in phased[0]}
    loads = [r["load_average_1m"] for r in runs]
    result: dict[str, Any] = {
        "brokers": a.brokers,
        "runs": a.runs,
        "load_average_1m": {"min": min(loads), "median": median(loads), "max": max(loads)},
        "kmeta": kmeta,
        "import_kmeta_cli_broker": {
            "wall_s": med("import_kmeta_cli_broker", "wall_s"),
            "cpu_s": med("import_kmeta_cli_broker", "cpu_s"),
        },
        "targets": {"ready_s": READY_TARGET_S, "teardown_s": TEARDOWN_TARGET_S, "at_load_at_most": 2},
        "meets": {
            "ready": kmeta["ready_s"] <= READY_TARGET_S,
            "teardown": kmeta["teardown_s"] <= TEARDOWN_TARGET_S,
            "load_within_target": median(loads) <= 2,
        },
        "every_run": runs,
    }
    if with_peer:
        mock = {"ready_s": med("librdkafka_mock", "ready_s"), "teardown_s": med("librdkafka_mock", "teardown_s")}
        result["librdkafka_mock"] = mock
        result["kmeta_to_mock_ready"] = round(kmeta["ready_s"] / mock["ready_s"], 1) if mock["ready_s"] else None
    else:
        result["peer_skipped"] = "confluent-kafka is not installed" if not a.no_peer else "--no-peer"
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
