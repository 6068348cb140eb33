"""An in-process broker over loopback leading ``__consumer_offsets`` (its control listener
takes the controller's UpdateMetadata and LeaderAndIsr, as in tests/server/log_broker.py), and
a small shard that keeps what the coordinator runtime replays into it: the runtime's user under
test, registered through the broker's seam (``state.coordinators.register_group_shards``).
Broker 2 is a replica that never runs: with it in the ISR nothing commits."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from kmeta.log.record.batch import header_at
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import leader_and_isr as lai
from kmeta.protocol.records.record_batch import crc32c
from kmeta.server.broker import Broker
from kmeta.server.coordinator import coordinators
from kmeta.server.coordinator.runtime import CoordinatorRuntime, ShardContext
from tests.server.helpers import (
    CONTROL,
    PLAINTEXT,
    live_broker,
    loopback_config,
    partition,
    topic_id,
    update_metadata,
)

TOPIC = "__consumer_offsets"
PARTITIONS = 2


class Shard:
    """Keeps what was replayed, in order, and what the runtime told it."""

    def __init__(self, ctx: ShardContext[Any]) -> None:
        self.partition = ctx.partition
        self.leader_epoch = ctx.leader_epoch
        self.events: list[tuple[Any, ...]] = []
        self.loaded = asyncio.Event()
        self.unloaded = False

    def replay(self, offset: int, producer_id: int, producer_epoch: int, key: bytes, value: bytes | None) -> None:
        self.events.append(("record", offset, producer_id, producer_epoch, key, value))

    def replay_end_transaction(self, producer_id: int, producer_epoch: int, committed: bool) -> None:
        self.events.append(("end", producer_id, producer_epoch, committed))

    def on_loaded(self) -> None:
        self.loaded.set()

    def on_unloaded(self) -> None:
        self.unloaded = True

    @property
    def keys(self) -> list[bytes]:
        return [e[4] for e in self.events if e[0] == "record"]


class Harness:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.shards: list[Shard] = []
        self.runtime: CoordinatorRuntime[Shard] = broker.state.coordinators.groups

    def make(self, ctx: ShardContext[Any]) -> Shard:
        shard = Shard(ctx)
        self.shards.append(shard)
        return shard

    async def control(self, request: Any) -> Any:
        conn = await KafkaConnection.open("127.0.0.1", self.broker.port(CONTROL))
        try:
            return await conn.request(request, 10)
        finally:
            conn.close()

    async def lead(self, index: int, leader: int, epoch: int, isr: Sequence[int], partition_epoch: int = 0) -> None:
        state = lai.LeaderAndIsrPartitionState(
            partition_index=index, controller_epoch=1, leader=leader, leader_epoch=epoch, isr=tuple(isr),
            partition_epoch=partition_epoch, replicas=(1, 2),
        )  # fmt: skip
        request = lai.LeaderAndIsrRequest(
            version=6, controller_id=1, controller_epoch=1, broker_epoch=-1,
            topic_states=(lai.LeaderAndIsrTopicState(TOPIC, topic_id(TOPIC), (state,)),),
        )  # fmt: skip
        assert (await self.control(request)).error_code == 0

    async def shard(self, index: int) -> Shard:
        """The loaded shard of ``index`` (waiting up to 5 s for its load)."""
        for _ in range(500):
            shard, error = self.runtime.shard_or_error(index)
            if shard is not None:
                return shard
            assert error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, error
            await asyncio.sleep(0.01)
        raise AssertionError(f"partition {index} did not load")

    def append_marker(self, index: int, producer_id: int, producer_epoch: int, commit: bool) -> None:
        """A COMMIT/ABORT control batch at the log end, as WriteTxnMarkers appends one, then
        the high watermark moved as the ISR (this leader alone) allows."""
        rm = self.broker.state.replica_manager
        part, error = rm.leader_partition_or_error(TOPIC, index)
        assert part is not None, error
        key = struct.pack(">hh", 0, 1 if commit else 0)
        value = struct.pack(">hi", 0, 0)
        # attributes, timestamp delta, offset delta (zigzag varints), key, value, no headers
        record = b"\x00\x00\x00" + bytes([len(key) * 2]) + key + bytes([len(value) * 2]) + value + b"\x00"
        records = bytes([len(record) * 2]) + record
        after_crc = struct.pack(">hiqqqhii", 0x30, 0, 0, 0, producer_id, producer_epoch, -1, 1) + records
        length = 4 + 1 + 4 + len(after_crc)
        batch = struct.pack(">qiibI", part.log.log_end_offset, length, part.leader_epoch, 2, crc32c(after_crc)) + after_crc
        assert header_at(batch).is_control
        part.log.append_as_follower(batch)
        if part.maybe_increment_leader_hw(part.state):
            rm.high_watermark_moved(part)


@asynccontextmanager
async def coordinator_broker(
    isr: Sequence[int] = (1,), *, register: bool = True, group_shards: bool = False, **config: Any
) -> AsyncIterator[Harness]:
    """Broker 1 leading every partition of ``__consumer_offsets`` (replicas 1, 2; ``isr``),
    the test shard registered first (``register``; else not at all); the broker's own group
    shards (SHARD_MODULES) only with ``group_shards``; ``config``: more BrokerConfig fields."""
    modules = coordinators.SHARD_MODULES
    if not group_shards:
        coordinators.SHARD_MODULES = ()
    try:
        broker = Broker(loopback_config(1, offsets_topic_num_partitions=PARTITIONS, **config))
    finally:
        coordinators.SHARD_MODULES = modules
    await broker.start()
    harness = Harness(broker)
    try:
        if register:
            broker.state.coordinators.register_group_shards(harness.make)
        brokers = [live_broker(1, {PLAINTEXT: ("127.0.0.1", broker.port(PLAINTEXT))})]
        parts = [partition(i, 1, (1, 2), isr=tuple(isr), leader_epoch=1) for i in range(PARTITIONS)]
        assert (await harness.control(update_metadata(brokers, {TOPIC: parts}))).error_code == 0
        for i in range(PARTITIONS):
            await harness.lead(i, 1, 1, isr)
        yield harness
    finally:
        await broker.stop()
