"""The classic group operations end to end over an in-memory runtime: the member id handshake,
a rebalance with its leader, sync written before it answers, heartbeats, leaving, expiry,
static members, group.max.size and a reload from the written records."""

from __future__ import annotations

import asyncio

import pytest

from kmeta.protocol.errors import ErrorCode
from kmeta.server.group.classic.classic import ClassicGroup, GroupState, JoinResult
from kmeta.server.group.classic.classic_join import JoinRequest
from kmeta.server.group.classic.classic_sync import SyncRequest
from kmeta.server.group.context import GroupConfig
from kmeta.server.group.records import read_group_metadata_value
from tests.server.group.memory_runtime import MemoryRuntime

FAST = GroupConfig(initial_rebalance_delay_ms=50, new_member_join_timeout_ms=2_000)


def join_request(member_id: str = "", *, instance: str | None = None, protocols: tuple[str, ...] = ("range",),
                 session_ms: int = 1_000, rebalance_ms: int = 1_000, v4: bool = True) -> JoinRequest:  # fmt: skip
    return JoinRequest(
        group_id="g",
        member_id=member_id,
        group_instance_id=instance,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type="consumer",
        protocols=tuple((p, f"{p}-meta".encode()) for p in protocols),
        client_id="client",
        client_host="/127.0.0.1",
        require_known_member_id=v4,
    )


async def join_new(runtime: MemoryRuntime, **kw: object) -> JoinResult:
    """KIP-394: the first join gets an id with MEMBER_ID_REQUIRED, the second joins with it."""
    first = await runtime.shard.groups.join(join_request(**kw))  # type: ignore[arg-type]
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("client-")
    return await runtime.shard.groups.join(join_request(first.member_id, **kw))  # type: ignore[arg-type]


async def sync(runtime: MemoryRuntime, join: JoinResult, assignments: dict[str, bytes] | None = None):  # type: ignore[no-untyped-def]
    return await runtime.shard.groups.sync(
        SyncRequest("g", join.generation_id, join.member_id, None, "consumer", join.protocol_name, assignments or {})
    )


def group(runtime: MemoryRuntime) -> ClassicGroup:
    found = runtime.shard.groups.classic_group("g")
    assert found is not None
    return found


async def stable_pair(runtime: MemoryRuntime) -> tuple[JoinResult, JoinResult]:
    a, b = await asyncio.gather(join_new(runtime), join_new(runtime))
    leader, follower = (a, b) if a.leader == a.member_id else (b, a)
    assert [m[0] for m in leader.members] == [leader.member_id, follower.member_id] or len(leader.members) == 2
    assert follower.members == ()
    answers = await asyncio.gather(
        sync(runtime, follower), sync(runtime, leader, {leader.member_id: b"L", follower.member_id: b"F"})
    )
    assert [x.assignment for x in answers] == [b"F", b"L"]
    return leader, follower


async def test_two_members_rebalance_and_the_assignment_is_written_first() -> None:
    runtime = MemoryRuntime(FAST)
    leader, follower = await stable_pair(runtime)
    assert leader.generation_id == follower.generation_id == 1
    assert leader.protocol_name == "range"
    assert {m[2] for m in leader.members} == {b"range-meta"}
    assert group(runtime).state == GroupState.STABLE
    value = read_group_metadata_value(runtime.records[-1][1] or b"")
    assert value.generation == 1
    assert {m.member_id: m.assignment for m in value.members} == {leader.member_id: b"L", follower.member_id: b"F"}
    # a later SyncGroup in Stable answers the stored assignment
    again = await sync(runtime, follower)
    assert (again.error, again.assignment) == (ErrorCode.NONE, b"F")
    hb = runtime.shard.groups.heartbeat
    assert hb("g", follower.member_id, None, 1) == ErrorCode.NONE
    assert hb("g", follower.member_id, None, 0) == ErrorCode.ILLEGAL_GENERATION
    assert hb("g", "stranger", None, 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert hb("nogroup", follower.member_id, None, 1) == ErrorCode.UNKNOWN_MEMBER_ID


async def test_leave_rebalances_and_the_rest_rejoin() -> None:
    runtime = MemoryRuntime(FAST)
    leader, follower = await stable_pair(runtime)
    error, each = runtime.shard.groups.leave("g", [(leader.member_id, None), ("ghost", None)])
    assert (error, each) == (ErrorCode.NONE, [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID])
    assert group(runtime).state == GroupState.PREPARING_REBALANCE
    assert runtime.shard.groups.heartbeat("g", follower.member_id, None, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoined = await runtime.shard.groups.join(join_request(follower.member_id))
    assert (rejoined.error, rejoined.generation_id, rejoined.leader) == (ErrorCode.NONE, 2, follower.member_id)
    # the last one leaving empties the group: a new generation, written Empty
    runtime.shard.groups.leave("g", [(follower.member_id, None)])
    assert group(runtime).state == GroupState.EMPTY
    await asyncio.sleep(0.01)
    value = read_group_metadata_value(runtime.records[-1][1] or b"")
    assert (value.generation, value.members, value.protocol) == (3, (), None)


async def test_session_expiry_removes_a_silent_member() -> None:
    runtime = MemoryRuntime(FAST)
    leader, follower = await stable_pair(runtime)
    for _ in range(8):  # the leader heartbeats, the follower does not
        await asyncio.sleep(0.2)
        error = runtime.shard.groups.heartbeat("g", leader.member_id, None, 1)
        if error == ErrorCode.REBALANCE_IN_PROGRESS:
            break
    assert error == ErrorCode.REBALANCE_IN_PROGRESS
    assert not group(runtime).has_member(follower.member_id)
    rejoined = await runtime.shard.groups.join(join_request(leader.member_id))
    assert rejoined.generation_id == 2
    assert [m[0] for m in rejoined.members] == [leader.member_id]


async def test_errors_before_joining() -> None:
    runtime = MemoryRuntime(FAST)
    groups = runtime.shard.groups
    assert (await groups.join(join_request("nobody"))).error == ErrorCode.UNKNOWN_MEMBER_ID
    leader, _ = await stable_pair(runtime)
    other = join_request(protocols=("roundrobin",))
    assert (await groups.join(other)).error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    wrong = await groups.sync(SyncRequest("g", 1, leader.member_id, None, "consumer", "roundrobin", {}))
    assert wrong.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    stale = await groups.sync(SyncRequest("g", 9, leader.member_id, None, None, None, {}))
    assert stale.error == ErrorCode.ILLEGAL_GENERATION


async def test_join_below_v4_needs_no_member_id_and_the_leader_rejoining_rebalances() -> None:
    runtime = MemoryRuntime(FAST)
    first = await runtime.shard.groups.join(join_request(v4=False))
    assert (first.error, first.generation_id, first.leader) == (ErrorCode.NONE, 1, first.member_id)
    await sync(runtime, first, {first.member_id: b"x"})
    again = await runtime.shard.groups.join(join_request(first.member_id, v4=False))
    assert again.generation_id == 2  # (the leader's JoinGroup in Stable starts a rebalance)


async def test_static_member_returns_without_rebalance_and_fences_its_old_id() -> None:
    runtime = MemoryRuntime(FAST)
    groups = runtime.shard.groups
    a, b = await asyncio.gather(
        groups.join(join_request(instance="ia")), groups.join(join_request(instance="ib"))
    )
    assert a.error == b.error == ErrorCode.NONE  # (static members need no MEMBER_ID_REQUIRED)
    leader, follower = (a, b) if a.leader == a.member_id else (b, a)
    await asyncio.gather(sync(runtime, follower), sync(runtime, leader, {a.member_id: b"A", b.member_id: b"B"}))
    instance = "ia" if follower is a else "ib"
    back = await groups.join(join_request(instance=instance))
    assert back.error == ErrorCode.NONE
    assert back.member_id != follower.member_id
    assert back.generation_id == 1  # the same generation: no rebalance
    assert group(runtime).state == GroupState.STABLE
    assert (await groups.sync(SyncRequest("g", 1, back.member_id, instance, None, None, {}))).assignment == follower_assignment(follower, a)
    assert groups.heartbeat("g", follower.member_id, instance, 1) == ErrorCode.FENCED_INSTANCE_ID
    # the new id is durable: a reload knows it
    reloaded = runtime.reload().groups.classic_group("g")
    assert reloaded is not None
    assert reloaded.static_member_id(instance) == back.member_id
    _error, each = runtime.shard.groups.leave("g", [("wrong-id", instance)])
    assert each == [ErrorCode.FENCED_INSTANCE_ID]


def follower_assignment(follower: JoinResult, a: JoinResult) -> bytes:
    return b"A" if follower is a else b"B"


async def test_group_max_size() -> None:
    runtime = MemoryRuntime(GroupConfig(initial_rebalance_delay_ms=50, max_size=1))
    leader = await join_new(runtime)
    await sync(runtime, leader, {leader.member_id: b"x"})
    third = await runtime.shard.groups.join(join_request(v4=False))
    assert third.error == ErrorCode.GROUP_MAX_SIZE_REACHED


async def test_a_reloaded_group_carries_on_with_its_generation() -> None:
    runtime = MemoryRuntime(FAST)
    leader, follower = await stable_pair(runtime)
    groups = runtime.reload().groups
    loaded = groups.classic_group("g")
    assert loaded is not None
    assert (loaded.state, loaded.generation_id, loaded.leader_id) == (GroupState.STABLE, 1, leader.member_id)
    assert groups.heartbeat("g", follower.member_id, None, 1) == ErrorCode.NONE
    answer = await groups.sync(SyncRequest("g", 1, follower.member_id, None, None, None, {}))
    assert answer.assignment == b"F"


async def test_a_failed_assignment_write_answers_everyone_and_rebalances() -> None:
    runtime = MemoryRuntime(FAST)
    a, b = await asyncio.gather(join_new(runtime), join_new(runtime))
    leader, follower = (a, b) if a.leader == a.member_id else (b, a)
    runtime.fail_with = ErrorCode.NOT_COORDINATOR
    answers = await asyncio.gather(sync(runtime, follower), sync(runtime, leader, {}))
    assert [x.error for x in answers] == [ErrorCode.NOT_COORDINATOR] * 2
    assert group(runtime).state == GroupState.PREPARING_REBALANCE


async def test_unload_answers_waiting_joins() -> None:
    runtime = MemoryRuntime(GroupConfig(initial_rebalance_delay_ms=5_000))
    first = await runtime.shard.groups.join(join_request())
    waiting = asyncio.ensure_future(runtime.shard.groups.join(join_request(first.member_id)))
    await asyncio.sleep(0.01)
    assert not waiting.done()  # (the initial rebalance delay)
    runtime.shard.on_unloaded()
    assert (await asyncio.wait_for(waiting, 1)).error == ErrorCode.NOT_COORDINATOR


@pytest.mark.parametrize("states", [{"stable"}, {"Empty"}])
async def test_list_groups_filters_states_case_insensitively(states: set[str]) -> None:
    runtime = MemoryRuntime(FAST)
    await stable_pair(runtime)
    listed = runtime.shard.groups.list_groups(states, set())
    assert [g.group_id for g in listed] == (["g"] if "stable" in states else [])
    assert runtime.shard.groups.list_groups(set(), {"consumer"}) == []
    assert [g.group_type for g in runtime.shard.groups.list_groups(set(), {"Classic"})] == ["classic"]


async def test_a_static_member_that_does_not_rejoin_keeps_its_place() -> None:
    runtime = MemoryRuntime(FAST)
    groups = runtime.shard.groups
    a, b = await asyncio.gather(
        groups.join(join_request(instance="ia", rebalance_ms=300)), groups.join(join_request(instance="ib", rebalance_ms=300))
    )
    leader = a if a.leader == a.member_id else b
    await asyncio.gather(*(sync(runtime, r, {a.member_id: b"A", b.member_id: b"B"} if r is leader else None) for r in (a, b)))
    # a dynamic member joins; only the leader rejoins: after the rebalance timeout the static
    # member that stayed silent is still in the new generation, the dynamic one is new
    newcomer = asyncio.ensure_future(groups.join(join_request(v4=False, rebalance_ms=300)))
    await asyncio.sleep(0.01)
    rejoined = await groups.join(join_request(leader.member_id, instance="ia" if leader is a else "ib", rebalance_ms=300))
    assert rejoined.generation_id == 2
    assert {m[0] for m in rejoined.members} == {a.member_id, b.member_id, (await newcomer).member_id}


async def test_a_member_that_never_syncs_is_removed_after_the_rebalance_timeout() -> None:
    runtime = MemoryRuntime(FAST)
    groups = runtime.shard.groups
    a, b = await asyncio.gather(join_new(runtime, rebalance_ms=200), join_new(runtime, rebalance_ms=200))
    leader, silent = (a, b) if a.leader == a.member_id else (b, a)
    answer = await sync(runtime, leader, {leader.member_id: b"L", silent.member_id: b"S"})
    assert answer.assignment == b"L"
    assert group(runtime).state == GroupState.STABLE
    assert groups.heartbeat("g", leader.member_id, None, 1) == ErrorCode.NONE
    await asyncio.sleep(0.3)  # (the silent member never sent SyncGroup)
    assert not group(runtime).has_member(silent.member_id)
    assert groups.heartbeat("g", leader.member_id, None, 1) == ErrorCode.REBALANCE_IN_PROGRESS
