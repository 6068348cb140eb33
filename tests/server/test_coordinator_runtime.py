"""The coordinator runtime on a real broker over loopback (its control listener takes the
controller's UpdateMetadata and LeaderAndIsr as in tests/server/log_broker.py): a small shard
defined here is the runtime's user under test, registered through the broker's seam
(``state.coordinators.register_group_shards``). Broker 2 is a replica that never runs: with it
in the ISR nothing commits, which is how an uncommitted record is made."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest

from kmeta.log.batch import header_at
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import leader_and_isr as lai
from kmeta.protocol.messages import stop_replica as sr
from kmeta.protocol.record_batch import crc32c
from kmeta.server.broker import Broker
from kmeta.server.coordinator.runtime import CoordinatorRuntime, ShardContext, partition_for
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
        """The loaded shard of ``index`` (waiting for its load)."""
        for _ in range(200):
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
async def coordinator_broker(isr: Sequence[int] = (1,)) -> AsyncIterator[Harness]:
    broker = Broker(loopback_config(1, offsets_topic_num_partitions=PARTITIONS))
    await broker.start()
    harness = Harness(broker)
    try:
        broker.state.coordinators.register_group_shards(harness.make)
        brokers = [live_broker(1, {PLAINTEXT: ("127.0.0.1", broker.port(PLAINTEXT))})]
        parts = [partition(i, 1, (1, 2), isr=tuple(isr), leader_epoch=1) for i in range(PARTITIONS)]
        assert (await harness.control(update_metadata(brokers, {TOPIC: parts}))).error_code == 0
        for i in range(PARTITIONS):
            await harness.lead(i, 1, 1, isr)
        yield harness
    finally:
        await broker.stop()


def test_partition_for_is_javas_string_hash_code_made_positive() -> None:
    # String.hashCode: "hello" 99162322; "polygenelubricants" is Integer.MIN_VALUE, which
    # Utils.abs maps to 0; "\U0001F600" is two UTF-16 code units (55357, 56832)
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("\U0001f600", 50) == (55357 * 31 + 56832) % 50
    assert partition_for("", 7) == 0
    assert partition_for("Aa", 1000) == partition_for("BB", 1000) == 2112 % 1000  # (a Java collision)


async def test_a_write_is_replayed_once_committed_and_the_shard_sees_it_in_order() -> None:
    async with coordinator_broker() as h:
        shard = await h.shard(0)
        assert shard.loaded.is_set()
        assert shard.events == []
        assert await h.runtime.write(0, [(b"k1", b"v1"), (b"k2", None)]) == ErrorCode.NONE
        assert shard.events == [("record", 0, -1, -1, b"k1", b"v1"), ("record", 1, -1, -1, b"k2", None)]
        results = await asyncio.gather(*(h.runtime.write(0, [(b"c%d" % i, b"x")]) for i in range(20)))
        assert results == [ErrorCode.NONE] * 20
        assert shard.keys[2:] == [b"c%d" % i for i in range(20)]  # (in submission order)
        assert [e[1] for e in shard.events] == list(range(22))
        assert h.runtime.shard_or_error(1)[0] is not shard
        assert h.runtime.leader_epoch(0) == 1


async def test_transactional_writes_and_markers_reach_the_shard_in_log_order() -> None:
    async with coordinator_broker() as h:
        shard = await h.shard(1)
        assert await h.runtime.write(1, [(b"t", b"1")], producer_id=7, producer_epoch=3, transactional=True) == ErrorCode.NONE
        h.append_marker(1, 7, 3, commit=True)
        assert await h.runtime.write(1, [(b"after", b"2")]) == ErrorCode.NONE
        assert shard.events == [
            ("record", 0, 7, 3, b"t", b"1"), ("end", 7, 3, True), ("record", 2, -1, -1, b"after", b"2"),
        ]  # fmt: skip
        h.append_marker(1, 8, 0, commit=False)  # (replayed when the high watermark moves)
        for _ in range(100):
            if shard.events[-1][0] == "end":
                break
            await asyncio.sleep(0.01)
        assert shard.events[-1] == ("end", 8, 0, False)


async def test_leadership_lost_unloads_and_regained_replays_exactly_the_log() -> None:
    async with coordinator_broker() as h:
        first = await h.shard(0)
        assert await h.runtime.write(0, [(b"a", b"1"), (b"b", b"2")]) == ErrorCode.NONE
        h.append_marker(0, 5, 1, commit=False)
        fired: list[str] = []

        async def never() -> None:
            fired.append("never")

        h.runtime.schedule(0, "session", 30.0, never)
        await h.lead(0, 2, 2, (2,))
        assert first.unloaded
        assert h.runtime.shard_or_error(0) == (None, ErrorCode.NOT_COORDINATOR)
        assert await h.runtime.write(0, [(b"c", b"3")]) == ErrorCode.NOT_COORDINATOR
        await h.lead(0, 1, 3, (1,))
        second = await h.shard(0)
        assert second is not first
        assert second.leader_epoch == 3
        assert second.events == first.events == [
            ("record", 0, -1, -1, b"a", b"1"), ("record", 1, -1, -1, b"b", b"2"), ("end", 5, 1, False),
        ]  # fmt: skip
        await asyncio.sleep(0.05)
        assert fired == []


async def test_stop_replica_unloads() -> None:
    async with coordinator_broker() as h:
        shard = await h.shard(1)
        request = sr.StopReplicaRequest(
            version=3, controller_id=1, controller_epoch=1, broker_epoch=-1,
            topic_states=(sr.StopReplicaTopicState(TOPIC, (sr.StopReplicaPartitionState(1, 2, False),)),),
        )  # fmt: skip
        assert (await h.control(request)).error_code == 0
        assert shard.unloaded
        assert h.runtime.shard_or_error(1) == (None, ErrorCode.NOT_COORDINATOR)


async def test_an_uncommitted_record_is_replayed_only_once_the_new_leader_commits_it() -> None:
    """The ISR holds broker 2, which never fetches: a write's batch stays above the high
    watermark (COORDINATOR_NOT_AVAILABLE after its timeout, as Kafka maps REQUEST_TIMED_OUT)
    and the shard never sees it. Re-elected at a new epoch, the load stops short of it
    (COORDINATOR_LOAD_IN_PROGRESS) until the ISR shrinks to this broker: then it is committed
    under the new epoch, and replayed."""
    async with coordinator_broker(isr=(1, 2)) as h:
        shard = await h.shard(0)
        assert await h.runtime.write(0, [(b"pending", b"1")], timeout_s=0.2) == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert shard.events == []
        await h.lead(0, 1, 2, (1, 2))
        assert h.runtime.shard_or_error(0)[0] is shard  # (same leader, new epoch: kept)
        await h.lead(0, 2, 3, (2, 1))
        await h.lead(0, 1, 4, (1, 2))
        await asyncio.sleep(0.1)
        assert h.runtime.shard_or_error(0) == (None, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        assert h.shards[-1].events == []
        await h.lead(0, 1, 5, (1,), partition_epoch=1)
        reloaded = await h.shard(0)
        assert reloaded.events == [("record", 0, -1, -1, b"pending", b"1")]


async def test_timers_fire_replace_and_cancel() -> None:
    async with coordinator_broker() as h:
        await h.shard(0)
        fired: list[str] = []

        def timer(name: str) -> Any:
            async def fn() -> None:
                fired.append(name)
            return fn

        h.runtime.schedule(0, "a", 0.01, timer("a1"))
        h.runtime.schedule(0, "a", 0.02, timer("a2"))  # (replaces a1)
        h.runtime.schedule(0, "b", 0.01, timer("b"))
        h.runtime.cancel(0, "b")
        await asyncio.sleep(0.1)
        assert fired == ["a2"]


@pytest.mark.parametrize("key_type", [0, 1])
async def test_shard_or_error_before_any_factory_for_the_other_topic(key_type: int) -> None:
    async with coordinator_broker() as h:
        runtime = h.broker.state.coordinators.runtime_for(key_type)
        assert runtime is not None
        if key_type == 1:  # (no __transaction_state partition is led here)
            assert runtime.shard_or_error(0) == (None, ErrorCode.NOT_COORDINATOR)
        else:
            assert (await h.shard(0)) is runtime.shard_or_error(0)[0]
