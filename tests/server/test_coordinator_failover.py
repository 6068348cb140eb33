"""The coordinator runtime on an in-process cluster (a real controller and three brokers over
loopback, real replication): the first FindCoordinator creates ``__consumer_offsets``, the
leader's shard writes with acks=all, and when that leader goes the new leader's shard loads
exactly what was written, and FindCoordinator names it. The shard is the one of
tests/server/coordinator_broker.py, registered on every broker through the seam."""

from __future__ import annotations

import asyncio
from typing import Any

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import find_coordinator as fc
from kmeta.server.coordinator.runtime import ShardContext
from tests.controller.helpers import start_cluster, wait_until
from tests.server.coordinator_broker import Shard

PARTITIONS = 3
KEY = "failover-group"


async def find(port: int, key: str, timeout_s: float = 20.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        conn = await KafkaConnection.open("127.0.0.1", port)
        try:
            answer = await conn.request(fc.FindCoordinatorRequest(version=3, key=key), 10)
        finally:
            conn.close()
        if answer.error_code == ErrorCode.NONE:
            return answer
        assert answer.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE, answer
        assert loop.time() < deadline, "no coordinator"
        await asyncio.sleep(0.1)


async def test_a_new_leader_loads_exactly_what_the_old_one_wrote(tmp_path: Any) -> None:
    overrides = {"offsets_topic_num_partitions": PARTITIONS, "replica_lag_time_max_ms": 2_000}
    c = await start_cluster(tmp_path, brokers=3, broker_overrides=overrides)
    shards: dict[int, list[Shard]] = {b: [] for b in c.brokers}
    try:
        for broker_id, broker in c.brokers.items():
            def make(ctx: ShardContext[Any], mine: list[Shard] = shards[broker_id]) -> Shard:
                mine.append(Shard(ctx))
                return mine[-1]

            broker.state.coordinators.register_group_shards(make)
        leader_id = (await find(c.client_port(1), KEY)).node_id
        runtime = c.brokers[leader_id].state.coordinators.groups
        index = runtime.partition_for(KEY)
        await wait_until(lambda: runtime.shard_or_error(index)[0] is not None, 10)
        snap = c.brokers[leader_id].cache.snapshot
        assert len(snap.partition_states["__consumer_offsets"]) == PARTITIONS
        assert len(snap.partition_states["__consumer_offsets"][index].replicas) == 3
        for i in range(30):
            assert await runtime.write(index, [(b"k%d" % i, b"v%d" % i)]) == ErrorCode.NONE
        assert await runtime.write(index, [(b"t", b"x")], producer_id=4, producer_epoch=0, transactional=True) == ErrorCode.NONE
        written = next(s for s in shards[leader_id] if s.partition == index).events
        assert len(written) == 31
        others = [b for b in c.brokers if b != leader_id]
        for b in others:
            assert c.brokers[b].state.coordinators.groups.shard_or_error(index)[0] is None
        await c.brokers[leader_id].stop()
        survivor = others[0]
        moved = await find(c.client_port(survivor), KEY)
        while moved.node_id == leader_id:
            await asyncio.sleep(0.1)
            moved = await find(c.client_port(survivor), KEY)
        assert moved.node_id in others
        new_runtime = c.brokers[moved.node_id].state.coordinators.groups
        await wait_until(lambda: new_runtime.shard_or_error(index)[0] is not None, 10)
        loaded = new_runtime.shard_or_error(index)[0]
        assert loaded is not None
        assert loaded.events == written
        assert loaded.loaded.is_set()
        assert await new_runtime.write(index, [(b"after", b"1")]) == ErrorCode.NONE
        assert loaded.events[-1] == ("record", 31, -1, -1, b"after", b"1")
    finally:
        await c.stop()
