"""Commit latency of a small transaction on a three-broker cluster (issue 30 point 6).

    .venv/bin/python benchmarks/txn_commit.py [--transactions 300] [--records 5] [--partitions 2]

A confluent-kafka transactional producer (``transactional.id``, acks=all) runs
``--transactions`` transactions one after another, each ``--records`` small records spread
over ``--partitions`` partitions of a topic with replication factor 3 and min.insync.replicas
2 (``__transaction_state`` as Kafka makes it: replication factor 3, min ISR 2). Timed per
transaction, from ``begin_transaction`` to ``commit_transaction``'s return:

* ``commit_ms``: ``commit_transaction`` alone (the records flushed, EndTxn: PrepareCommit
  written to the coordinator's partition with acks=all, then answered; the markers follow);
* ``transaction_ms``: the whole transaction (AddPartitionsToTxn, the verified produce,
  the commit).

The first 10 transactions are a warm-up and not counted. Afterwards a read_committed consumer
checks every record is there exactly once. Prints one JSON object (p50 / p99 / max in ms).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from kmeta.testing import Cluster

TOPIC = "txn-bench"
WARMUP = 10


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def _summary(values: list[float]) -> dict[str, float]:
    return {"p50": _pct(values, 0.5), "p99": _pct(values, 0.99), "max": round(max(values), 2),
            "mean": round(statistics.fmean(values), 2)}  # fmt: skip


def _committed(cluster: Cluster, partitions: int) -> int:
    consumer = Consumer({
        **cluster.client_config(), "group.id": "txn-bench-check", "enable.auto.commit": False,
        "isolation.level": "read_committed", "enable.partition.eof": True,
    })  # fmt: skip
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
        seen: set[bytes] = set()
        count, ended = 0, 0
        deadline = time.monotonic() + 60
        while ended < partitions and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                error = m.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    ended += 1
                elif error is None:
                    seen.add(m.value())
                    count += 1
        if count != len(seen):
            raise SystemExit(f"{count - len(seen)} records read twice")
        return count
    finally:
        consumer.close()


def run(transactions: int, records: int, partitions: int) -> dict[str, Any]:
    with Cluster(3, log_level="WARNING") as cluster:
        cluster.create_topic(TOPIC, partitions, 3, configs={"min.insync.replicas": "2"})
        producer = Producer({**cluster.client_config(), "transactional.id": "bench-1", "linger.ms": 0})
        producer.init_transactions(60)
        commit_ms: list[float] = []
        whole_ms: list[float] = []
        n = 0
        for t in range(transactions + WARMUP):
            started = time.perf_counter()
            producer.begin_transaction()
            for i in range(records):
                producer.produce(TOPIC, b"%d-%d" % (t, i), partition=i % partitions)
                n += 1
            committing = time.perf_counter()
            producer.commit_transaction(60)
            done = time.perf_counter()
            if t >= WARMUP:
                commit_ms.append((done - committing) * 1000)
                whole_ms.append((done - started) * 1000)
        stored = _committed(cluster, partitions)
        if stored != n:
            raise SystemExit(f"read_committed holds {stored} records, {n} were committed")
    return {
        "transactions": transactions, "records_per_transaction": records, "partitions": partitions,
        "commit_ms": _summary(commit_ms), "transaction_ms": _summary(whole_ms),
        "records_checked": stored,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=300)
    parser.add_argument("--records", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=2)
    args = parser.parse_args()
    print(json.dumps(run(args.transactions, args.records, args.partitions), indent=2))


if __name__ == "__main__":
    main()
