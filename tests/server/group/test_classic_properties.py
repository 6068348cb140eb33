"""Random sequences of JoinGroup, SyncGroup, Heartbeat and LeaveGroup from a few clients
(right and wrong member ids, generations, instance ids and protocols) against one group
shard: every request gets an answer with an error code (none hangs once the shard unloads),
nothing raises, and the group's bookkeeping holds after every step."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kmeta.protocol.errors import ErrorCode
from kmeta.server.group.classic.classic import ClassicGroup, GroupState
from kmeta.server.group.classic.classic_join import JoinRequest
from kmeta.server.group.classic.classic_sync import SyncRequest
from kmeta.server.group.context import GroupConfig
from tests.server.group.memory_runtime import MemoryRuntime

CONFIG = GroupConfig(initial_rebalance_delay_ms=5, new_member_join_timeout_ms=300)
CLIENTS = 4

op = st.tuples(
    st.sampled_from(["join", "join_known", "join_known", "sync", "sync", "heartbeat", "leave", "leave_static", "sleep"]),
    st.integers(0, CLIENTS - 1),  # which client
    st.booleans(),  # static member (an instance id) or not
    st.sampled_from([0, 0, 0, 0, -1, 1]),  # a generation offset (mostly the one it heard)
    st.sampled_from([("range",), ("roundrobin",), ("range", "roundrobin")]),
    st.booleans(),  # v4+ (member id required)
)


def check(group: ClassicGroup) -> None:
    assert group.leader_id is None or group.leader_id in group.members
    assert (group.leader_id is None) == (not group.members)
    for instance, member_id in group.static_members.items():
        assert group.members[member_id].group_instance_id == instance
    assert group.pending_sync <= set(group.members)
    assert not (group.pending_members & set(group.members))
    if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        assert group.protocol_name in group.candidate_protocols()
    if group.state == GroupState.STABLE:
        assert not any(m.awaiting_join for m in group.members.values())
    if group.state == GroupState.EMPTY:
        assert not group.members


async def play(ops: list[tuple[Any, ...]]) -> None:
    runtime = MemoryRuntime(CONFIG)
    groups = runtime.shard.groups
    known: dict[int, tuple[str, int]] = {}  # client -> (member id, generation) it last heard
    waiting: list[asyncio.Future[Any]] = []

    def remember(client: int, fut: asyncio.Future[Any]) -> None:
        def done(f: asyncio.Future[Any]) -> None:
            result = f.result()
            assert isinstance(result.error, ErrorCode)
            if getattr(result, "member_id", ""):
                known[client] = (result.member_id, getattr(result, "generation_id", -1))

        fut.add_done_callback(done)
        waiting.append(fut)

    for kind, client, static, gen_offset, protocols, v4 in ops:
        instance = f"i{client}" if static else None
        member_id, generation = known.get(client, ("", -1))
        if kind in ("join", "join_known"):
            request = JoinRequest(
                "g", member_id if kind == "join_known" else "", instance, 200, 50, "consumer",
                tuple((p, p.encode()) for p in protocols), f"c{client}", "/h", v4,
            )  # fmt: skip
            remember(client, asyncio.ensure_future(groups.join(request)))
        elif kind == "sync":
            assignments = {m: b"x" for m, _ in known.values()}
            request_s = SyncRequest("g", generation + gen_offset, member_id, instance, None, None, assignments)
            waiting.append(asyncio.ensure_future(groups.sync(request_s)))
        elif kind == "heartbeat":
            assert isinstance(groups.heartbeat("g", member_id, instance, generation + gen_offset), ErrorCode)
        elif kind in ("leave", "leave_static"):
            error, each = groups.leave("g", [(member_id, instance if kind == "leave_static" else None)])
            assert isinstance(error, ErrorCode)
            assert len(each) == (1 if error == ErrorCode.NONE else 0)
        await asyncio.sleep(0.06 if kind == "sleep" else 0.01)
        group = groups.classic_group("g")
        if group is not None:
            check(group)
    runtime.shard.on_unloaded()
    results = await asyncio.wait_for(asyncio.gather(*waiting), 2)
    assert all(isinstance(r.error, ErrorCode) for r in results)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(st.lists(op, min_size=1, max_size=25))
def test_random_member_traffic_keeps_the_group_consistent(ops: list[tuple[Any, ...]]) -> None:
    asyncio.run(play(ops))
