"""The group APIs on a broker leading ``__consumer_offsets`` (in process, over loopback): the
answers and errors as Kafka gives them at each version, the assignment written to the log
before SyncGroup answers, DeleteGroups' tombstone, and Group ACLs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kmeta.net.connection import KafkaConnection
from kmeta.net.principal import KafkaPrincipal
from kmeta.net.security.acl import AclBinding, AclOperation, ResourceType
from kmeta.net.security.authorizer import AclSet, AuthorizerConfig, parse_super_users
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import delete_groups as dlg
from kmeta.protocol.messages import describe_groups as dg
from kmeta.protocol.messages import heartbeat as hb
from kmeta.protocol.messages import join_group as jg
from kmeta.protocol.messages import leave_group as lg
from kmeta.protocol.messages import list_groups as lsg
from kmeta.protocol.messages import sync_group as sg
from kmeta.server.coordinator.records import DataRecord, read_entries
from kmeta.server.coordinator.runtime import partition_for
from kmeta.server.group.records import (
    key_version,
    read_group_metadata_key,
    read_group_metadata_value,
)
from tests.server.coordinator_broker import PARTITIONS, TOPIC, Harness, coordinator_broker
from tests.server.helpers import PLAINTEXT
from tests.server.principals import QueuedPrincipals, user

FAST: dict[str, Any] = {"group_initial_rebalance_delay_ms": 100, "group_min_session_timeout_ms": 1_000}
PROTOCOLS = (jg.JoinGroupRequestProtocol("range", b"sub"),)


@pytest.fixture
async def broker() -> AsyncIterator[Harness]:
    async with coordinator_broker(register=False, group_shards=True, **FAST) as h:
        for i in range(PARTITIONS):
            await h.shard(i)
        yield h


async def connect(h: Harness) -> KafkaConnection:
    return await KafkaConnection.open("127.0.0.1", h.broker.port(PLAINTEXT))


def join(version: int = 9, member_id: str = "", group: str = "g", **kw: Any) -> jg.JoinGroupRequest:
    return jg.JoinGroupRequest(
        version=version, group_id=group, session_timeout_ms=kw.pop("session_timeout_ms", 10_000),
        rebalance_timeout_ms=5_000, member_id=member_id, protocol_type="consumer",
        protocols=kw.pop("protocols", PROTOCOLS), **kw,
    )  # fmt: skip


def records(h: Harness, group: str) -> list[tuple[bytes, bytes | None]]:
    """The group's metadata records in its __consumer_offsets partition, in log order."""
    part, _ = h.broker.state.replica_manager.leader_partition_or_error(TOPIC, partition_for(group, PARTITIONS))
    assert part is not None
    hw = part.log.high_watermark
    entries, _ = read_entries(part.log.read(0, 1 << 20, hw).records, 0, hw)
    return [
        (e.key, e.value)
        for e in entries
        if isinstance(e, DataRecord) and e.key is not None and key_version(e.key) == 2 and read_group_metadata_key(e.key) == group
    ]


async def test_a_member_joins_syncs_heartbeats_and_the_group_is_described_and_listed(broker: Harness) -> None:
    conn = await connect(broker)
    try:
        first = await conn.request(join(), 10)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        assert first.member_id.startswith("kmeta")  # (the client id, then a uuid)
        assert first.protocol_name is None  # (nullable from v7)
        joined = await conn.request(join(member_id=first.member_id), 10)
        assert (joined.error_code, joined.generation_id, joined.protocol_type, joined.protocol_name) == (0, 1, "consumer", "range")
        assert joined.leader == joined.member_id == first.member_id
        assert [(m.member_id, bytes(m.metadata)) for m in joined.members] == [(first.member_id, b"sub")]
        mismatch = await conn.request(sg.SyncGroupRequest(version=5, group_id="g", generation_id=1, member_id=first.member_id, protocol_type="consumer", protocol_name="roundrobin"), 10)
        assert mismatch.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        synced = await conn.request(sg.SyncGroupRequest(
            version=5, group_id="g", generation_id=1, member_id=first.member_id, protocol_type="consumer",
            protocol_name="range", assignments=(sg.SyncGroupRequestAssignment(first.member_id, b"mine"),),
        ), 10)  # fmt: skip
        assert (synced.error_code, bytes(synced.assignment), synced.protocol_name) == (0, b"mine", "range")
        (_key, value), = records(broker, "g")
        stored = read_group_metadata_value(value or b"")
        assert (stored.generation, stored.leader, [bytes(m.assignment) for m in stored.members]) == (1, first.member_id, [b"mine"])
        for version in range(5):
            answer = await conn.request(hb.HeartbeatRequest(version=version, group_id="g", generation_id=1, member_id=first.member_id), 10)
            assert answer.error_code == 0
        stale = await conn.request(hb.HeartbeatRequest(version=4, group_id="g", generation_id=0, member_id=first.member_id), 10)
        assert stale.error_code == ErrorCode.ILLEGAL_GENERATION
        described = await conn.request(dg.DescribeGroupsRequest(version=5, groups=("g", "nobody"), include_authorized_operations=True), 10)
        g, nobody = described.groups
        assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (0, "Stable", "consumer", "range")
        assert [(m.member_id, m.client_host, bytes(m.member_metadata), bytes(m.member_assignment)) for m in g.members] == [
            (first.member_id, "/127.0.0.1", b"sub", b"mine")
        ]
        assert g.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE
        assert (nobody.error_code, nobody.group_state, nobody.members) == (0, "Dead", ())
        for version, filters, expect in ((0, {}, ""), (4, {"states_filter": ("STABLE",)}, "Stable"),
                                         (4, {"states_filter": ("Empty",)}, None), (5, {"types_filter": ("classic",)}, "Stable")):  # fmt: skip
            listed = await conn.request(lsg.ListGroupsRequest(version=version, **filters), 10)
            assert listed.error_code == 0
            assert [(x.group_id, x.group_state) for x in listed.groups] == ([] if expect is None else [("g", expect)])
        refused = await conn.request(dlg.DeleteGroupsRequest(version=2, groups_names=("g", "nobody", "")), 10)
        assert [(r.group_id, r.error_code) for r in refused.results] == [
            ("g", ErrorCode.NON_EMPTY_GROUP), ("nobody", ErrorCode.GROUP_ID_NOT_FOUND), ("", ErrorCode.INVALID_GROUP_ID)
        ]
        left = await conn.request(lg.LeaveGroupRequest(version=5, group_id="g", members=(lg.MemberIdentity(first.member_id), lg.MemberIdentity("ghost"))), 10)
        assert (left.error_code, [(m.member_id, m.error_code) for m in left.members]) == (
            0, [(first.member_id, 0), ("ghost", ErrorCode.UNKNOWN_MEMBER_ID)]
        )
        deleted = await conn.request(dlg.DeleteGroupsRequest(version=2, groups_names=("g",)), 10)
        assert [(r.group_id, r.error_code) for r in deleted.results] == [("g", 0)]
        *_, (_, tombstone) = records(broker, "g")
        assert tombstone is None
        after = await conn.request(dg.DescribeGroupsRequest(version=5, groups=("g",)), 10)
        assert after.groups[0].group_state == "Dead"
    finally:
        conn.close()


async def test_errors_before_the_group(broker: Harness) -> None:
    conn = await connect(broker)
    try:
        assert (await conn.request(join(group=""), 10)).error_code == ErrorCode.INVALID_GROUP_ID
        short = await conn.request(join(session_timeout_ms=500), 10)
        assert short.error_code == ErrorCode.INVALID_SESSION_TIMEOUT
        assert (await conn.request(join(member_id="who"), 10)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        empty = await conn.request(join(protocols=()), 10)
        assert empty.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        old = await conn.request(join(version=6, protocols=()), 10)
        assert old.protocol_name == ""  # (not nullable before v7)
        assert (await conn.request(sg.SyncGroupRequest(version=0, group_id="x", member_id="m"), 10)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert (await conn.request(hb.HeartbeatRequest(version=0, group_id="x", member_id="m"), 10)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert (await conn.request(lg.LeaveGroupRequest(version=0, group_id="x", member_id="m"), 10)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    finally:
        conn.close()


async def test_a_waiting_join_holds_up_no_other_connection(broker: Harness) -> None:
    """v0 joins at once; its answer waits for the initial rebalance delay (here 100 ms) and,
    meanwhile, another connection is answered."""
    a, b = await connect(broker), await connect(broker)
    try:
        waiting = asyncio.ensure_future(a.request(join(version=0, session_timeout_ms=10_000), 10))
        await asyncio.sleep(0.02)
        listed = await b.request(lsg.ListGroupsRequest(version=4), 10)
        assert [(x.group_id, x.group_state) for x in listed.groups] == [("g", "PreparingRebalance")]
        assert not waiting.done()
        answer = await waiting
        assert (answer.error_code, answer.generation_id) == (0, 1)
    finally:
        a.close()
        b.close()


ALICE, BOB, CAROL, DAVE, OPS = user("alice"), user("bob"), user("carol"), user("dave"), user("ops")


def allow(who: KafkaPrincipal, op: int, rtype: int = ResourceType.GROUP, name: str = "g") -> AclBinding:
    return AclBinding(rtype, name, 3, str(who), "*", op, 3)


async def test_group_acls() -> None:
    authz = AuthorizerConfig(True, parse_super_users("User:ANONYMOUS"))
    async with coordinator_broker(register=False, group_shards=True, authorizer=authz, **FAST) as h:
        for i in range(PARTITIONS):
            await h.shard(i)
        assert h.broker.state.authorizer is not None
        h.broker.state.authorizer.replace(AclSet([
            allow(ALICE, AclOperation.READ), allow(ALICE, AclOperation.DESCRIBE),
            allow(BOB, AclOperation.DESCRIBE), allow(CAROL, AclOperation.DELETE),
            allow(OPS, AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"),
        ]))  # fmt: skip
        principals = QueuedPrincipals()
        for listener in h.broker.listeners:
            if not listener.info.is_control:
                principals.attach(listener)

        async def call(who: KafkaPrincipal, request: Any) -> Any:
            conn = await principals.connect(h.broker.port(PLAINTEXT), who)
            try:
                return await conn.request(request, 10)
            finally:
                conn.close()

        assert (await call(BOB, join(version=0))).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        joined = await call(ALICE, join(version=0))
        assert joined.error_code == 0
        for request in (
            sg.SyncGroupRequest(version=0, group_id="g", generation_id=1, member_id=joined.member_id),
            hb.HeartbeatRequest(version=0, group_id="g", generation_id=1, member_id=joined.member_id),
            lg.LeaveGroupRequest(version=0, group_id="g", member_id=joined.member_id),
        ):
            assert (await call(BOB, request)).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        described = await call(DAVE, dg.DescribeGroupsRequest(version=5, groups=("g",)))
        assert described.groups[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        by_bob = await call(BOB, dg.DescribeGroupsRequest(version=5, groups=("g",), include_authorized_operations=True))
        assert (by_bob.groups[0].error_code, by_bob.groups[0].authorized_operations) == (0, 1 << 8)  # DESCRIBE only
        assert [x.group_id for x in (await call(DAVE, lsg.ListGroupsRequest(version=4))).groups] == []
        # (DELETE, like READ, implies DESCRIBE: Kafka's ACL semantics)
        assert [x.group_id for x in (await call(CAROL, lsg.ListGroupsRequest(version=4))).groups] == ["g"]
        assert [x.group_id for x in (await call(BOB, lsg.ListGroupsRequest(version=4))).groups] == ["g"]
        assert [x.group_id for x in (await call(OPS, lsg.ListGroupsRequest(version=4))).groups] == ["g"]
        refused = await call(ALICE, dlg.DeleteGroupsRequest(version=2, groups_names=("g",)))
        assert refused.results[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        allowed = await call(CAROL, dlg.DeleteGroupsRequest(version=2, groups_names=("g",)))
        assert allowed.results[0].error_code == ErrorCode.NON_EMPTY_GROUP  # (past the ACL)


async def test_a_static_leader_rejoining_skips_the_assignment_on_v9(broker: Harness) -> None:
    """KIP-814: a static leader coming back under a new member id gets the members and
    skip_assignment (v9), the same generation, and the group stays Stable."""
    a, b = await connect(broker), await connect(broker)
    try:
        first, second = await asyncio.gather(
            a.request(join(group="s", group_instance_id="ia"), 10), b.request(join(group="s", group_instance_id="ib"), 10)
        )
        assert first.error_code == second.error_code == 0
        leader, follower = (first, second) if first.leader == first.member_id else (second, first)
        leader_conn = a if leader is first else b
        follower_conn = b if leader is first else a
        leader_instance = "ia" if leader is first else "ib"
        assignments = tuple(sg.SyncGroupRequestAssignment(m.member_id, m.member_id.encode()) for m in leader.members)
        await asyncio.gather(
            leader_conn.request(sg.SyncGroupRequest(version=5, group_id="s", generation_id=1, member_id=leader.member_id, group_instance_id=leader_instance, assignments=assignments), 10),
            follower_conn.request(sg.SyncGroupRequest(version=5, group_id="s", generation_id=1, member_id=follower.member_id, group_instance_id="ib" if leader_instance == "ia" else "ia"), 10),
        )  # fmt: skip
        back = await leader_conn.request(join(group="s", group_instance_id=leader_instance), 10)
        assert (back.error_code, back.generation_id, back.skip_assignment) == (0, 1, True)
        assert back.member_id != leader.member_id
        assert back.leader == back.member_id
        assert {m.member_id for m in back.members} == {back.member_id, follower.member_id}
        old = await leader_conn.request(hb.HeartbeatRequest(version=4, group_id="s", generation_id=1, member_id=leader.member_id, group_instance_id=leader_instance), 10)
        assert old.error_code == ErrorCode.FENCED_INSTANCE_ID
        described = await follower_conn.request(dg.DescribeGroupsRequest(version=5, groups=("s",)), 10)
        assert described.groups[0].group_state == "Stable"
        mine = {m.member_id: bytes(m.member_assignment) for m in described.groups[0].members}
        assert mine == {back.member_id: leader.member_id.encode(), follower.member_id: follower.member_id.encode()}
    finally:
        a.close()
        b.close()
