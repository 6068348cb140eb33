"""The consumer groups of a group shard on an in-memory runtime (writes commit at once and
replay through the shard; timers are the loop's): session and rebalance timeouts fence a
member, a failed write answers its error and changes nothing, a reloaded shard gives loaded
members their sessions, and an applied metadata change refreshes the group by itself."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import consumer_group_heartbeat as cgh
from kmeta.server.group.consumer.consumer_coordinator import ConsumerGroupCoordinator
from kmeta.server.group.consumer.consumer_group import ConsumerGroup
from kmeta.server.group.consumer.consumer_heartbeat import ConsumerGroupConfig, Outcome
from kmeta.server.group.consumer.consumer_member import MemberState
from kmeta.server.group.context import GroupConfig, Record
from kmeta.server.group.shard import GroupCoordinatorShard
from tests.server.group.consumer_harness import Cluster
from tests.server.group.memory_runtime import MemoryRuntime


class Runtime(MemoryRuntime):
    """MemoryRuntime with write_op, its shard serving consumer groups."""

    def __init__(self, cluster: Cluster, **config: int) -> None:
        super().__init__(GroupConfig())
        self.cluster = cluster
        self.config = ConsumerGroupConfig(**config)
        self._attach(self.shard)

    def _attach(self, shard: GroupCoordinatorShard) -> None:
        shard.consumer_records = ConsumerGroupCoordinator(shard.ctx, self, lambda: self.cluster.snap, self.config)

    @property
    def consumer(self) -> ConsumerGroupCoordinator:
        assert isinstance(self.shard.consumer_records, ConsumerGroupCoordinator)
        return self.shard.consumer_records

    async def write_op(self, partition: int, op: Callable[[Any], tuple[Sequence[Record], Outcome]]) -> tuple[ErrorCode, Outcome | None]:
        records, result = op(self.shard)
        return (await self.write(partition, records) if records else ErrorCode.NONE), result

    def reload(self) -> GroupCoordinatorShard:
        self.shard.on_unloaded()
        for key in list(self.timers):
            self.cancel(0, key)
        self.shard = GroupCoordinatorShard(0, self, self.shard.ctx.config)
        self._attach(self.shard)
        for offset, (key, value) in enumerate(self.records):
            self.shard.replay(offset, -1, -1, key, value)
        self.shard.on_loaded()
        return self.shard

    def group(self) -> ConsumerGroup:
        group = self.shard.ctx.groups["g"]
        assert isinstance(group, ConsumerGroup)
        return group


def join(member_id: str, topics: Sequence[str] = ("t",), rebalance_ms: int = 60_000) -> cgh.ConsumerGroupHeartbeatRequest:
    return cgh.ConsumerGroupHeartbeatRequest(
        group_id="g", member_id=member_id, member_epoch=0, rebalance_timeout_ms=rebalance_ms,
        subscribed_topic_names=topics, topic_partitions=(),
    )  # fmt: skip


def setup(**config: int) -> Runtime:
    cluster = Cluster()
    cluster.set_topic("t", 4)
    return Runtime(cluster, **config)


async def wait_for(check: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Until ``check()``; the timers fire on the loop meanwhile."""
    for _ in range(int(timeout_s / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


async def test_a_member_that_stops_heartbeating_is_fenced_when_its_session_ends() -> None:
    runtime = setup(session_timeout_ms=200)
    r = await runtime.consumer.heartbeat(join("a"), "c", "/h")
    assert (r.error_code, r.member_id, r.member_epoch) == (ErrorCode.NONE, "a", 1)
    assert "consumer-group-session-timeout-g-a" in runtime.timers
    await wait_for(lambda: "a" not in runtime.group().members)
    assert runtime.group().group_epoch == 2
    assert runtime.group().state_name == "Empty"


async def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    runtime = setup()
    a = await runtime.consumer.heartbeat(join("a"), "c", "/h")
    assert a.assignment is not None
    b = await runtime.consumer.heartbeat(join("b", rebalance_ms=60_000), "c", "/h")
    assert b.assignment is not None
    assert b.assignment.topic_partitions == ()  # a still holds them
    # a is asked to revoke two partitions and has 150 ms to do it
    runtime.config = ConsumerGroupConfig()
    request = cgh.ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="a", member_epoch=a.member_epoch, rebalance_timeout_ms=150,
        topic_partitions=a.assignment.topic_partitions,
    )  # fmt: skip
    await runtime.consumer.heartbeat(request, "c", "/h")
    assert runtime.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert "consumer-group-rebalance-timeout-g-a" in runtime.timers
    await wait_for(lambda: "a" not in runtime.group().members)
    r = await runtime.consumer.heartbeat(
        cgh.ConsumerGroupHeartbeatRequest(group_id="g", member_id="b", member_epoch=b.member_epoch, topic_partitions=()), "c", "/h"
    )
    assert r.assignment is not None
    assert sorted(p for tp in r.assignment.topic_partitions for p in tp.partitions) == [0, 1, 2, 3]


async def test_a_failed_write_answers_its_error_and_changes_nothing() -> None:
    runtime = setup()
    runtime.fail_with = ErrorCode.NOT_COORDINATOR
    r = await runtime.consumer.heartbeat(join("a"), "c", "/h")
    assert r.error_code == ErrorCode.NOT_COORDINATOR
    assert "g" not in runtime.shard.ctx.groups
    assert runtime.timers == {}


async def test_a_reloaded_shard_gives_loaded_members_a_session() -> None:
    runtime = setup(session_timeout_ms=300)
    await runtime.consumer.heartbeat(join("a"), "c", "/h")
    epoch = runtime.group().group_epoch
    runtime.reload()
    assert runtime.group().members["a"].member_epoch == 1
    assert "consumer-group-session-timeout-g-a" in runtime.timers
    await wait_for(lambda: "a" not in runtime.group().members)
    assert runtime.group().group_epoch == epoch + 1


async def test_metadata_applied_refreshes_the_group_without_a_heartbeat() -> None:
    runtime = setup()
    await runtime.consumer.heartbeat(join("a"), "c", "/h")
    epoch = runtime.group().group_epoch
    runtime.cluster.set_topic("t", 6)
    runtime.consumer.metadata_changed()
    await wait_for(lambda: runtime.group().assignment_epoch == epoch + 1)
    assert runtime.group().target_of("a") == {runtime.cluster.ids["t"]: frozenset(range(6))}
    runtime.consumer.metadata_changed()  # (nothing changed since: nothing written)
    written = len(runtime.records)
    await asyncio.sleep(0.05)
    assert len(runtime.records) == written
