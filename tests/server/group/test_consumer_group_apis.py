"""ConsumerGroupHeartbeat and ConsumerGroupDescribe on a broker leading ``__consumer_offsets``
(in process, over loopback): a join answered once its records are in the log, a topic added
to the metadata assigned at the next heartbeat, the group in ListGroups as type "consumer",
DeleteGroups of an empty consumer group, and the Group and Topic ACLs as Kafka 4 checks them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from kmeta.net.principal import KafkaPrincipal
from kmeta.net.security.acl import AclBinding, AclOperation, ResourceType
from kmeta.net.security.authorizer import AclSet, AuthorizerConfig, parse_super_users
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import consumer_group_describe as cgd
from kmeta.protocol.messages import consumer_group_heartbeat as cgh
from kmeta.protocol.messages import delete_groups as dlg
from kmeta.protocol.messages import list_groups as lsg
from kmeta.server.coordinator.records import DataRecord, read_entries
from kmeta.server.coordinator.runtime import partition_for
from kmeta.server.group.consumer import consumer_records as rec
from tests.server.coordinator_broker import PARTITIONS, TOPIC, Harness, coordinator_broker
from tests.server.group.test_group_apis import connect
from tests.server.helpers import PLAINTEXT, live_broker, partition, topic_id, update_metadata
from tests.server.principals import QueuedPrincipals, user

FAST = {"group_consumer_heartbeat_interval_ms": 500}


@pytest.fixture
async def broker() -> AsyncIterator[Harness]:
    async with coordinator_broker(register=False, group_shards=True, **FAST) as h:
        for i in range(PARTITIONS):
            await h.shard(i)
        yield h


async def add_topic(h: Harness, name: str, partitions: int) -> None:
    brokers = [live_broker(1, {PLAINTEXT: ("127.0.0.1", h.broker.port(PLAINTEXT))})]
    offsets = [partition(i, 1, (1, 2), isr=(1,), leader_epoch=1) for i in range(PARTITIONS)]
    parts = [partition(i, 1, (1, 2), isr=(1,)) for i in range(partitions)]
    assert (await h.control(update_metadata(brokers, {TOPIC: offsets, name: parts}))).error_code == 0


def join(member_id: str, topics: tuple[str, ...] = ("t",), group: str = "g") -> cgh.ConsumerGroupHeartbeatRequest:
    return cgh.ConsumerGroupHeartbeatRequest(
        version=1, group_id=group, member_id=member_id, member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_names=topics, topic_partitions=(),
    )  # fmt: skip


def consumer_records(h: Harness, group: str) -> list[int]:
    """The key versions of the group's consumer records in its partition, in log order."""
    part, _ = h.broker.state.replica_manager.leader_partition_or_error(TOPIC, partition_for(group, PARTITIONS))
    assert part is not None
    hw = part.log.high_watermark
    entries, _ = read_entries(part.log.read(0, 1 << 20, hw).records, 0, hw)
    return [
        rec.key_version(e.key)
        for e in entries
        if isinstance(e, DataRecord) and e.key is not None and rec.key_version(e.key) in rec.KEY_VERSIONS
        and rec.decode_key(e.key)[1] == group
    ]


async def test_join_assign_grow_describe_list_leave_delete(broker: Harness) -> None:
    h = broker
    conn = await connect(h)
    try:
        bad = await conn.request(join("m1", group=""), 10)
        assert (bad.error_code, bad.error_message) == (ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        first = await conn.request(join("m1", ("t",)), 10)
        # (no topic "t" yet: a member with nothing to consume, as Kafka's test)
        assert (first.error_code, first.member_id, first.member_epoch, first.heartbeat_interval_ms) == (0, "m1", 1, 500)
        assert first.assignment == cgh.Assignment(())
        assert consumer_records(h, "g") == [rec.MEMBER_METADATA, rec.GROUP_METADATA, rec.TARGET_ASSIGNMENT_MEMBER,
                                            rec.TARGET_ASSIGNMENT_METADATA, rec.CURRENT_MEMBER_ASSIGNMENT]  # fmt: skip
        await add_topic(h, "t", 3)
        beat = cgh.ConsumerGroupHeartbeatRequest(version=1, group_id="g", member_id="m1", member_epoch=1)
        second = None
        for _ in range(100):
            second = await conn.request(beat._replace(member_epoch=(second or first).member_epoch), 10)
            if second.assignment is not None and second.assignment.topic_partitions:
                break
        assert second is not None
        assert second.assignment == cgh.Assignment((cgh.TopicPartitions(topic_id("t"), (0, 1, 2)),))
        assert second.member_epoch == 2
        described = (await conn.request(cgd.ConsumerGroupDescribeRequest(group_ids=("g", "", "nope"), include_authorized_operations=True), 10)).groups
        assert (described[0].error_code, described[0].group_state, described[0].group_epoch, described[0].assignor_name) == (0, "Stable", 2, "uniform")
        assert described[0].members[0].assignment == cgd.Assignment((cgd.TopicPartitions(topic_id("t"), "t", (0, 1, 2)),))
        assert described[0].members[0].client_host == "/127.0.0.1"
        assert described[0].authorized_operations == (1 << 3) | (1 << 8) | (1 << 6)
        assert [g.error_code for g in described[1:]] == [ErrorCode.INVALID_GROUP_ID, ErrorCode.GROUP_ID_NOT_FOUND]
        listed = await conn.request(lsg.ListGroupsRequest(version=5, types_filter=("consumer",)), 10)
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups] == [("g", "consumer", "Stable", "consumer")]
        busy = await conn.request(dlg.DeleteGroupsRequest(version=2, groups_names=("g",)), 10)
        assert busy.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
        left = await conn.request(beat._replace(member_epoch=-1), 10)
        assert (left.error_code, left.member_epoch) == (0, -1)
        deleted = await conn.request(dlg.DeleteGroupsRequest(version=2, groups_names=("g",)), 10)
        assert deleted.results[0].error_code == ErrorCode.NONE
        gone = await conn.request(cgd.ConsumerGroupDescribeRequest(group_ids=("g",)), 10)
        assert gone.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert consumer_records(h, "g")[-1] == rec.GROUP_METADATA  # (its tombstone, last)
    finally:
        conn.close()


ALICE, BOB, CAROL = user("alice"), user("bob"), user("carol")


def allow(who: KafkaPrincipal, op: int, rtype: int = ResourceType.GROUP, name: str = "g") -> AclBinding:
    return AclBinding(rtype, name, 3, str(who), "*", op, 3)


async def test_group_and_topic_acls() -> None:
    authz = AuthorizerConfig(True, parse_super_users("User:ANONYMOUS"))
    async with coordinator_broker(register=False, group_shards=True, authorizer=authz, **FAST) as h:
        for i in range(PARTITIONS):
            await h.shard(i)
        await add_topic(h, "t", 2)
        assert h.broker.state.authorizer is not None
        h.broker.state.authorizer.replace(AclSet([
            allow(ALICE, AclOperation.READ), allow(ALICE, AclOperation.DESCRIBE, ResourceType.TOPIC, "t"),
            allow(BOB, AclOperation.READ), allow(BOB, AclOperation.DESCRIBE),
            allow(CAROL, AclOperation.DESCRIBE),
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

        refused = await call(CAROL, join("c1"))  # no READ on the group
        assert (refused.error_code, refused.error_message) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
        assert (await call(BOB, join("b1"))).error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # no DESCRIBE on t
        joined = await call(ALICE, join("a1"))
        assert joined.error_code == ErrorCode.NONE
        assert joined.assignment is not None
        assert joined.assignment.topic_partitions == (cgh.TopicPartitions(topic_id("t"), (0, 1)),)
        # CAROL may describe the group but not topic t, which its members are assigned
        hidden = (await call(CAROL, cgd.ConsumerGroupDescribeRequest(group_ids=("g",)))).groups[0]
        assert (hidden.error_code, hidden.members) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ())
        assert hidden.error_message == "The group has described topic(s) that the client is not authorized to describe."
        shown = (await call(ALICE, cgd.ConsumerGroupDescribeRequest(group_ids=("g",)))).groups[0]
        assert shown.error_code == ErrorCode.NONE  # (READ implies DESCRIBE)
