"""Refused writes: how fast a controller whose store cannot write answers, at scale.

A controller (in this process, propagation barrier off, so an answer is the controller's own
time) holds ``--partitions`` partitions (topics of 100) on 3 registered brokers. Measured:

1. ``accepted``: ``--requests`` CreateTopics (1 partition each) one after another: the
   baseline of the same run;
2. ``refused``: the same while the store refuses every write (SQLite's read-only mode on the
   controller's connection, as on a read-only file system): each is answered
   KAFKA_STORAGE_ERROR after the state is reloaded from the store;
3. ``refused_burst``: ``--requests`` refused CreateTopics sent at once (one group commit, one
   reload): the slowest answer;
4. ``accepted_after``: the first accepted change once the store writes again.

Prints one JSON object. Example: python benchmarks/refused_writes.py --partitions 100000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from typing import Any

from kmeta.controller.config import ControllerConfig
from kmeta.controller.daemon import ControllerDaemon
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import broker_registration as br
from kmeta.protocol.messages import create_topics as ct

PARTITIONS_PER_TOPIC = 100


def _create(names: list[str], partitions: int) -> ct.CreateTopicsRequest:
    return ct.CreateTopicsRequest(
        version=7,
        topics=tuple(
            ct.CreatableTopic(name=n, num_partitions=partitions, replication_factor=3)
            for n in names
        ),
        timeout_ms=30_000,
    )


async def _timed(conn: KafkaConnection, request: Any) -> tuple[float, int]:
    t0 = time.perf_counter()
    answer = await conn.request(request, 60.0)
    return (time.perf_counter() - t0) * 1000, answer.topics[0].error_code


def _summary(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(ms), 2), "max_ms": round(max(ms), 2)}


async def run(partitions: int, requests: int) -> dict[str, Any]:
    data_dir = tempfile.mkdtemp(prefix="kmeta-refused-")
    daemon = ControllerDaemon(
        ControllerConfig(
            data_dir=data_dir,
            listeners=("CONTROLLER://127.0.0.1:0",),
            propagation_barrier=False,
            state_change_log=False,
            session_timeout_ms=600_000,
        )
    )
    await daemon.start()
    conn = await KafkaConnection.open("127.0.0.1", daemon.port, timeout_s=60.0)
    try:
        for broker_id in (1, 2, 3):  # (their control port is closed: sends just retry)
            await conn.request(
                br.BrokerRegistrationRequest(
                    version=4,
                    broker_id=broker_id,
                    cluster_id="",
                    incarnation_id=uuid.uuid4(),
                    listeners=(br.Listener("CONTROL", "127.0.0.1", 9, 0),),
                ),
                10.0,
            )
        topics = partitions // PARTITIONS_PER_TOPIC
        for start in range(0, topics, 100):
            names = [f"t{i}" for i in range(start, min(topics, start + 100))]
            await conn.request(_create(names, PARTITIONS_PER_TOPIC), 60.0)
        controller = daemon.controller
        db = controller.store._db
        accepted = [(await _timed(conn, _create([f"a{i}"], 1)))[0] for i in range(requests)]

        await controller.enqueue("StoreReadOnly", lambda: db.execute("PRAGMA query_only=ON"))
        refused: list[float] = []
        for i in range(requests):
            ms, error = await _timed(conn, _create([f"r{i}"], 1))
            assert error == ErrorCode.KAFKA_STORAGE_ERROR, error
            refused.append(ms)
        conns = [
            await KafkaConnection.open("127.0.0.1", daemon.port, timeout_s=60.0)
            for _ in range(requests)
        ]
        burst = await asyncio.gather(
            *(_timed(c, _create([f"b{i}"], 1)) for i, c in enumerate(conns))
        )
        for c in conns:
            c.close()
        assert {error for _, error in burst} == {ErrorCode.KAFKA_STORAGE_ERROR}
        await controller.enqueue("StoreWritable", lambda: db.execute("PRAGMA query_only=OFF"))
        after_ms, error = await _timed(conn, _create(["after"], 1))
        assert error == ErrorCode.NONE, error
        held = sum(len(t.partitions) for t in controller.state.topics.values())
    finally:
        conn.close()
        await daemon.stop()
    return {
        "partitions": held,
        "requests": requests,
        "accepted": _summary(accepted),
        "refused": _summary(refused),
        "refused_burst": {"slowest_ms": round(max(ms for ms, _ in burst), 2)},
        "accepted_after_ms": round(after_ms, 2),
        "ratio_refused_p50_to_accepted_p50": round(
            statistics.median(refused) / statistics.median(accepted), 2
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--requests", type=int, default=10)
    args = ap.parse_args()
    print(json.dumps(asyncio.run(run(args.partitions, args.requests)), indent=2))


if __name__ == "__main__":
    main()
