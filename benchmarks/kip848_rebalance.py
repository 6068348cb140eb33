"""KIP-848 rebalance time: librdkafka consumers (``group.protocol=consumer``) on a 1-broker
kmeta cluster, the server assignor (uniform) deciding.

    python benchmarks/kip848_rebalance.py [--members 3,10,50] [--partitions 60]
        [--heartbeat-interval-ms 500] [--runs 3]

For each member count N, each run in a fresh group on a fresh topic, all in this process (the
consumers are polled round-robin by one thread, as the e2e tests do):

* join: N members subscribe at once -> every partition assigned exactly once, balanced (the
  members' sizes within one);
* leave: one member closes (a heartbeat with epoch -1) -> its partitions reassigned, balanced;
* grow: the topic gets N more partitions -> all assigned, balanced (metadata-driven: no client
  Metadata refresh).

A KIP-848 member learns of a new target at its next heartbeat, so the times are a few heartbeat
intervals (``--heartbeat-interval-ms``, the broker's group.consumer.heartbeat.interval.ms;
Kafka's default is 5000). Prints one JSON object: medians and every run, with the load average.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
from confluent_kafka import Consumer

from kmeta.testing import Cluster


def assigned(members: list[Consumer]) -> list[int]:
    return sorted(p.partition for c in members for p in c.assignment())


def settled(members: list[Consumer], partitions: int) -> bool:
    """Every partition assigned exactly once, and balanced (sizes within one): the uniform
    assignor's target reached by every member."""
    sizes = [len(c.assignment()) for c in members]
    return assigned(members) == list(range(partitions)) and max(sizes) - min(sizes) <= 1


def until(members: list[Consumer], done: Any, timeout_s: float = 120.0) -> float:
    """Poll every member until ``done()``; the seconds it took."""
    started = time.monotonic()
    while not done():
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"not settled after {timeout_s} s: {len(assigned(members))} partitions assigned")
        for c in members:
            c.poll(0)
        time.sleep(0.005)
    return time.monotonic() - started


def one_run(cluster: Cluster, n: int, partitions: int, tag: str) -> dict[str, float]:
    topic, group = f"bench-{tag}", f"bench-{tag}"
    cluster.create_topic(topic, partitions, 1)
    config = {**cluster.client_config(), "group.id": group, "group.protocol": "consumer",
              "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": -1}  # fmt: skip
    members = [Consumer(config) for _ in range(n)]
    for c in members:
        c.subscribe([topic])
    join = until(members, lambda: settled(members, partitions))
    members.pop().close()
    leave = until(members, lambda: settled(members, partitions))
    cluster.add_partitions(topic, partitions + n)
    grow = until(members, lambda: settled(members, partitions + n))
    for c in members:
        c.close()
    return {"join_s": round(join, 3), "leave_s": round(leave, 3), "grow_s": round(grow, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", default="3,10,50")
    parser.add_argument("--partitions", type=int, default=60)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    counts = [int(n) for n in args.members.split(",")]
    doc = common.envelope("kip848-rebalance", vars(args), "python benchmarks/kip848_rebalance.py " + " ".join(sys.argv[1:]))
    flags = ("--group-consumer-heartbeat-interval-ms", str(args.heartbeat_interval_ms))
    result: dict[str, Any] = {}
    with Cluster(1, offsets_topic_num_partitions=3, broker_args=flags) as cluster:
        for n in counts:
            runs = []
            for run in range(args.runs):
                measured = one_run(cluster, n, args.partitions, f"{n}-{run}")
                measured["load_1m"] = common.load_average()[0]
                runs.append(measured)
            result[str(n)] = {
                **{f"median_{k}": statistics.median(r[k] for r in runs) for k in ("join_s", "leave_s", "grow_s")},
                "runs": runs,
            }
    print(json.dumps(common.finish(doc, result), indent=1))


if __name__ == "__main__":
    main()
