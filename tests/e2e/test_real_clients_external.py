"""kcat (librdkafka's command line, Debian's package) and kafkajs (node, tests/e2e/js) against a
kmeta.testing cluster: produce 10,000 records, list the offsets (earliest, latest, by time),
consume every record from each. ``make`` installs both (targets ``kcat``, ``js-clients``).
The plan and the checks: tests/e2e/real_clients.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kmeta.testing import Cluster
from tests.e2e.real_clients import (
    ROUND_TRIP_S,
    Consumed,
    Plan,
    Timer,
    check_consumed,
    check_listed,
    plan,
)

pytestmark = pytest.mark.e2e

JS = Path(__file__).parent / "js"


@pytest.fixture(scope="module")
def cluster(kmeta_cluster_factory: Callable[..., Cluster]) -> Iterator[Cluster]:
    with kmeta_cluster_factory(3) as c:
        yield c


# -- kcat -------------------------------------------------------------------------------------
def kcat(cluster: Cluster, *args: str, stdin: str | None = None) -> str:
    path = shutil.which("kcat")
    assert path is not None, "kcat is not installed: `make kcat` (apt-get install kcat)"
    done = subprocess.run(
        [path, "-b", cluster.bootstrap_servers, "-q", *args],
        input=stdin, capture_output=True, text=True, timeout=ROUND_TRIP_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def kcat_query(cluster: Cluster, p: Plan, ts: int) -> dict[int, int]:
    """``kcat -Q``: each partition's offset for ``ts`` (-2 earliest, -1 latest: ListOffsets)."""
    out = kcat(cluster, "-Q", *(a for q in range(p.partitions) for a in ("-t", f"{p.topic}:{q}:{ts}")))
    found = {int(q): int(o) for q, o in re.findall(r"\[(\d+)\]\s+offset\s+(-?\d+)", out)}
    assert len(found) == p.partitions, out
    return found


def kcat_consume(cluster: Cluster, p: Plan, partition: int, start: str) -> list[Consumed]:
    out = kcat(cluster, "-C", "-t", p.topic, "-p", str(partition), "-o", start, "-e", "-f", "%o %T %s\n")
    return [(int(o), v, int(ts)) for o, ts, v in (line.split(" ", 2) for line in out.splitlines())]


def test_kcat_round_trip(cluster: Cluster) -> None:
    """kcat -P sets no create time of its own choosing (librdkafka stamps the produce call):
    the first half is produced, then the second, and the by-time listing asks for the moment
    between them."""
    p = plan(cluster, "rt-kcat")
    timer = Timer("kcat")
    halves: list[dict[int, list[str]]] = [{q: [] for q in range(p.partitions)} for _ in range(2)]
    for q, value, _ in p.records():
        halves[int(value) >= p.half][q].append(value)
    between = 0
    for n, half in enumerate(halves):
        if n == 1:
            time.sleep(0.01)
            between = int(time.time() * 1000)
            time.sleep(0.01)
        for q, values in half.items():
            kcat(cluster, "-P", "-t", p.topic, "-p", str(q), stdin="\n".join(values) + "\n")
    timer.lap("produce")
    earliest, latest = kcat_query(cluster, p, -2), kcat_query(cluster, p, -1)
    at_time = kcat_query(cluster, p, between)
    check_listed(p, earliest, latest, at_time)
    timer.lap("list offsets")

    def check(start: dict[int, int], got: dict[int, list[Consumed]]) -> None:
        check_consumed(p, start, got, times=False)
        for records in got.values():  # the create times librdkafka gave, either side of the gap
            assert all((ts >= between) == (int(v) >= p.half) for _, v, ts in records)

    check(earliest, {q: kcat_consume(cluster, p, q, "beginning") for q in range(p.partitions)})
    timer.lap("consume from earliest")
    check(at_time, {q: kcat_consume(cluster, p, q, f"s@{between}") for q in range(p.partitions)})
    timer.lap("consume from by-time")
    assert kcat_consume(cluster, p, 0, "end") == []
    (last,) = kcat_consume(cluster, p, 1, str(latest[1] - 1))
    assert last[:2] == (latest[1] - 1, p.values(1)[-1])
    timer.report()


# -- kafkajs ------------------------------------------------------------------------------------
def test_kafkajs_round_trip(cluster: Cluster) -> None:
    assert (JS / "node_modules" / "kafkajs").is_dir(), "kafkajs is not installed: `make js-clients`"
    p = plan(cluster, "rt-kafkajs")
    args = {"brokers": cluster.bootstrap_servers, "topic": p.topic, "count": p.count,
            "partitions": p.partitions, "t0": p.t0, "byTime": p.by_time}  # fmt: skip
    done = subprocess.run(
        ["node", "round_trip.js", json.dumps(args)],
        cwd=JS, capture_output=True, text=True, timeout=ROUND_TRIP_S * 2, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)

    def keyed(d: dict[str, object]) -> dict[int, object]:
        return {int(k): v for k, v in d.items()}

    earliest, latest, at_time = (keyed(out[k]) for k in ("earliest", "latest", "atTime"))
    check_listed(p, earliest, latest, at_time)  # type: ignore[arg-type]
    for start, key in ((earliest, "fromEarliest"), (at_time, "fromTime")):
        got = {q: [tuple(r) for r in rs] for q, rs in keyed(out[key]).items()}  # type: ignore[attr-defined]
        check_consumed(p, start, got)  # type: ignore[arg-type]
    timer = Timer("kafkajs")
    timer.phases = out["seconds"]
    timer.report()
