"""Hostile group members against a real broker leading ``__consumer_offsets`` (over loopback).

* A flood of JoinGroups asking for new member ids (KIP-394): each id waits as a pending member
  only until its session timeout, as Kafka's ``pending-<group>-<member>`` timer has it, so the
  flood leaves neither members nor timers behind, and a real member still joins the group.
* A member that joins and then vanishes (its connection closed, no LeaveGroup, no heartbeat)
  is removed after its timeouts, and the group goes on for the member that stays.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import heartbeat as hb
from kmeta.protocol.messages import join_group as jg
from kmeta.protocol.messages import sync_group as sg
from kmeta.server.coordinator.runtime import partition_for
from kmeta.server.group.classic.classic import ClassicGroup
from tests.server.coordinator_broker import PARTITIONS, Harness, coordinator_broker
from tests.server.helpers import PLAINTEXT

SESSION_MS = 1_000
REBALANCE_MS = 2_000
FAST: dict[str, Any] = {"group_initial_rebalance_delay_ms": 100, "group_min_session_timeout_ms": SESSION_MS}
PROTOCOLS = (jg.JoinGroupRequestProtocol("range", b"sub"),)


@pytest.fixture
async def broker() -> AsyncIterator[Harness]:
    async with coordinator_broker(register=False, group_shards=True, **FAST) as h:
        for index in range(PARTITIONS):
            await h.shard(index)  # (every __consumer_offsets partition loaded)
        yield h


def join(group: str, member_id: str = "", session_ms: int = SESSION_MS) -> jg.JoinGroupRequest:
    return jg.JoinGroupRequest(
        version=9, group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=REBALANCE_MS,
        member_id=member_id, protocol_type="consumer", protocols=PROTOCOLS,
    )  # fmt: skip


def classic_group(h: Harness, group_id: str) -> ClassicGroup:
    shard, _ = h.runtime.shard_or_error(partition_for(group_id, PARTITIONS))
    assert shard is not None
    group = shard.groups.group_or_none(group_id)
    assert isinstance(group, ClassicGroup)
    return group


def pending_timers(h: Harness, group_id: str) -> list[str]:
    ctx = h.runtime._contexts[partition_for(group_id, PARTITIONS)]
    return [key for key in ctx._timers if key.startswith(f"pending-{group_id}-")]


async def heartbeats(conn: KafkaConnection, group: str, generation: int, member_id: str) -> ErrorCode:
    """Heartbeat every quarter session until an answer is not NONE (as the Java client does
    from a completed join on, through its SyncGroup)."""
    while True:
        beat = await conn.request(hb.HeartbeatRequest(version=4, group_id=group, generation_id=generation, member_id=member_id), 5)
        if beat.error_code != ErrorCode.NONE:
            return ErrorCode(beat.error_code)
        await asyncio.sleep(SESSION_MS / 1000 / 4)


async def member_loop(conn: KafkaConnection, group: str, member_id: str, deadline_s: float) -> tuple[int, list[str]]:
    """A well-behaved consumer: join, sync (as leader: everyone gets an assignment) while
    heartbeating, heartbeat; rejoin on REBALANCE_IN_PROGRESS. Returns (generation, members)
    once it is the group's only member, or fails at the deadline."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while loop.time() < end:
        joined = await conn.request(join(group, member_id), REBALANCE_MS / 1000 * 4)
        if joined.error_code != ErrorCode.NONE:
            assert joined.error_code == ErrorCode.REBALANCE_IN_PROGRESS, joined
            continue
        beating = asyncio.ensure_future(heartbeats(conn, group, joined.generation_id, member_id))
        try:
            members = [m.member_id for m in joined.members]
            assignments = tuple(sg.SyncGroupRequestAssignment(m, b"a") for m in members)
            synced = await conn.request(sg.SyncGroupRequest(
                version=5, group_id=group, generation_id=joined.generation_id, member_id=member_id,
                protocol_type="consumer", protocol_name="range", assignments=assignments,
            ), REBALANCE_MS / 1000 * 4)  # fmt: skip
            if synced.error_code != ErrorCode.NONE:
                assert synced.error_code == ErrorCode.REBALANCE_IN_PROGRESS, synced
                continue
            if members == [member_id]:
                return joined.generation_id, members
            # (stable with others, or a follower: heartbeat until a rebalance starts)
            error = await asyncio.wait_for(asyncio.shield(beating), max(end - loop.time(), 0.1))
            assert error == ErrorCode.REBALANCE_IN_PROGRESS, error
        finally:
            beating.cancel()
    raise AssertionError(f"{member_id} never became the only member of {group}")


async def test_a_flood_of_new_member_ids_expires_and_the_group_goes_on(broker: Harness) -> None:
    port = broker.broker.port(PLAINTEXT)
    flood = await KafkaConnection.open("127.0.0.1", port)
    try:
        answers = await asyncio.gather(*(flood.request(join("flooded"), 10) for _ in range(300)))
        assert {a.error_code for a in answers} == {ErrorCode.MEMBER_ID_REQUIRED}
        assert len({a.member_id for a in answers}) == 300
        group = classic_group(broker, "flooded")
        assert len(group.pending_members) == 300
        assert not group.members
        # none came back: after the session timeout the ids and their timers are gone
        loop = asyncio.get_running_loop()
        end = loop.time() + SESSION_MS / 1000 * 5
        while (group.pending_members or pending_timers(broker, "flooded")) and loop.time() < end:  # noqa: ASYNC110
            await asyncio.sleep(0.05)  # (a timer of the broker's, not an event to wait on)
        assert not group.pending_members
        assert not pending_timers(broker, "flooded")
        # a handed-out id that expired is unknown now, as in Kafka
        late = await flood.request(join("flooded", answers[0].member_id), 10)
        assert late.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        # and a real member joins the group
        first = await flood.request(join("flooded"), 10)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        generation, members = await member_loop(flood, "flooded", first.member_id, 15)
        assert (generation, members) == (1, [first.member_id])
    finally:
        flood.close()


async def test_a_member_that_joins_and_vanishes_is_removed_and_the_group_goes_on(broker: Harness) -> None:
    port = broker.broker.port(PLAINTEXT)
    stays = await KafkaConnection.open("127.0.0.1", port)
    vanishes = await KafkaConnection.open("127.0.0.1", port)
    try:
        a = (await stays.request(join("g"), 10)).member_id
        b = (await vanishes.request(join("g"), 10)).member_id
        # both join the first generation: A runs its loop, B (the leader) sends its JoinGroup and
        # goes away with it unanswered (no SyncGroup, no heartbeat, no LeaveGroup). B's session
        # is the longer one: A waits in SyncGroup past its own session timeout, which keeps it
        # a member (Kafka's hasSatisfiedHeartbeat: a member awaiting sync), until the sync
        # timeout (the rebalance timeout) removes B, which never sent its SyncGroup
        b_join = asyncio.ensure_future(vanishes.request(join("g", b, session_ms=3 * SESSION_MS), 10))
        await asyncio.sleep(0.05)
        first = await stays.request(join("g", a), 10)
        assert (first.error_code, first.generation_id, first.leader) == (ErrorCode.NONE, 1, b)  # (B joined first)
        vanishes.close()
        b_join.cancel()
        generation, members = await member_loop(stays, "g", a, (SESSION_MS + REBALANCE_MS) / 1000 * 4)
        assert members == [a]
        assert generation > first.generation_id
        assert b not in classic_group(broker, "g").members
    finally:
        stays.close()
        vanishes.close()


async def test_a_flood_of_new_groups_is_cleaned_up_however_many_there_are() -> None:
    """Groups a client created and left empty (each a JoinGroup whose member id never came
    back) go at the retention check, as Kafka's cleanupGroupMetadata deletes empty groups
    without offsets. Their tombstones outgrow one __consumer_offsets message: the check writes
    them in several batches (it wrote one, which failed for good, and kept every group)."""
    config = {**FAST, "group_initial_rebalance_delay_ms": 0, "offsets_retention_check_interval_ms": 3_000}
    async with coordinator_broker(register=False, group_shards=True, **config) as h:
        shards = []
        for index in range(PARTITIONS):
            for _ in range(500):
                shard, _ = h.runtime.shard_or_error(index)
                if shard is not None:
                    shards.append(shard)
                    break
                await asyncio.sleep(0.01)
        conn = await KafkaConnection.open("127.0.0.1", h.broker.port(PLAINTEXT))
        try:
            names = [f"flood-{i:05}".ljust(1_000, "x") for i in range(2_500)]  # (~2.5 MB of ids)
            answers = await asyncio.gather(*(conn.request(join(name), 30) for name in names))
            assert {a.error_code for a in answers} == {ErrorCode.MEMBER_ID_REQUIRED}
            # (each was a group, in memory; the first check may already have run meanwhile)
            loop = asyncio.get_running_loop()
            end = loop.time() + 20
            while sum(len(s.groups.ctx.groups) for s in shards) and loop.time() < end:  # noqa: ASYNC110
                await asyncio.sleep(0.1)  # (the broker's retention check, not an event to wait on)
            assert sum(len(s.groups.ctx.groups) for s in shards) == 0
            # and the coordinator goes on
            first = await conn.request(join("after"), 10)
            assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        finally:
            conn.close()
