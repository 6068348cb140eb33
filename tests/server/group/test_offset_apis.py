"""The offset APIs on one broker that leads ``__consumer_offsets`` (one partition, led here):
OffsetCommit / OffsetFetch / OffsetDelete / TxnOffsetCommit over loopback, their versions,
Kafka's authorization (--authorizer acl, principals set per connection) and their errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kmeta.net.principal import KafkaPrincipal
from kmeta.net.security.acl import AclBinding, AclOperation, ResourceType
from kmeta.net.security.authorizer import AclSet, AuthorizerConfig, parse_super_users
from kmeta.protocol.errors import ErrorCode as E
from kmeta.protocol.messages import offset_commit as oc
from kmeta.protocol.messages import offset_delete as od
from kmeta.protocol.messages import offset_fetch as of
from kmeta.protocol.messages import txn_offset_commit as tc
from kmeta.server.broker import Broker
from kmeta.server.metrics import BrokerCollector
from tests.server.helpers import PLAINTEXT
from tests.server.log_broker import TOPIC, batch, log_broker, produce
from tests.server.principals import QueuedPrincipals, user

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ADMIN, READER, VIEWER, NOBODY, CLEANER = user("admin"), user("reader"), user("viewer"), user("nobody"), user("cleaner")
LITERAL, ALLOW = 3, 3
OFFSETS_TOPIC = "__consumer_offsets"


def acl(who: KafkaPrincipal, op: int, rtype: int, name: str) -> AclBinding:
    return AclBinding(rtype, name, LITERAL, str(who), "*", op, ALLOW)


@pytest.fixture
async def broker() -> AsyncIterator[tuple[Broker, QueuedPrincipals]]:
    authz = AuthorizerConfig(True, parse_super_users("User:ANONYMOUS;User:admin"))
    async with log_broker({OFFSETS_TOPIC: {"cleanup.policy": "compact"}}, authorizer=authz) as b:
        assert b.state.authorizer is not None
        b.state.authorizer.replace(AclSet([
            acl(READER, AclOperation.READ, ResourceType.GROUP, "g"),
            acl(READER, AclOperation.READ, ResourceType.TOPIC, TOPIC),
            acl(VIEWER, AclOperation.DESCRIBE, ResourceType.GROUP, "g"),
            acl(CLEANER, AclOperation.DELETE, ResourceType.GROUP, "g"),
            acl(CLEANER, AclOperation.READ, ResourceType.TOPIC, TOPIC),
        ]))  # fmt: skip
        principals = QueuedPrincipals(default=ADMIN)
        for listener in b.listeners:
            if not listener.info.is_control:
                principals.attach(listener)
        yield b, principals


async def call(broker: tuple[Broker, QueuedPrincipals], request: Any, who: KafkaPrincipal = ADMIN) -> Any:
    b, principals = broker
    conn = await principals.connect(b.port(PLAINTEXT), who)
    try:
        for _ in range(100):  # (the shard loads once the partition's leadership applied)
            response = await conn.request(request, 10)
            if E.COORDINATOR_LOAD_IN_PROGRESS not in _errors(response):
                return response
            await asyncio.sleep(0.05)
        return response
    finally:
        conn.close()


def _errors(response: Any) -> set[int]:
    found = {getattr(response, "error_code", 0)}
    for t in getattr(response, "topics", ()):
        found |= {p.error_code for p in t.partitions}
    for g in getattr(response, "groups", ()):
        found.add(g.error_code)
    return found


def commit(group: str, offsets: dict[int, int], version: int = 9, topic: str = TOPIC, **fields: Any) -> oc.OffsetCommitRequest:
    parts = tuple(oc.OffsetCommitRequestPartition(p, o, 3, committed_metadata=f"m{p}") for p, o in offsets.items())
    return oc.OffsetCommitRequest(version=version, group_id=group, topics=(oc.OffsetCommitRequestTopic(topic, parts),), **fields)


def fetch(group: str, partitions: tuple[int, ...] | None, version: int = 9, stable: bool = False) -> of.OffsetFetchRequest:
    if version >= 8:
        topics = None if partitions is None else (of.OffsetFetchRequestTopics(TOPIC, partitions),)
        return of.OffsetFetchRequest(version=version, groups=(of.OffsetFetchRequestGroup(group, topics=topics),), require_stable=stable)
    return of.OffsetFetchRequest(
        version=version, group_id=group, require_stable=stable,
        topics=None if partitions is None else (of.OffsetFetchRequestTopic(TOPIC, partitions),),
    )  # fmt: skip


def committed(response: of.OffsetFetchResponse) -> dict[int, tuple[int, int, str | None, int]]:
    topics = response.groups[0].topics if response.version >= 8 else response.topics
    return {p.partition_index: (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code) for t in topics for p in t.partitions}


async def test_commit_and_fetch_every_version(broker: Any) -> None:
    for version in range(10):
        group = f"v{version}"
        got = await call(broker, commit(group, {0: 10 + version, 1: 20}, version=version))
        assert [p.error_code for t in got.topics for p in t.partitions] == [E.NONE, E.NONE], version
    for version in range(10):
        fetched = committed(await call(broker, fetch(f"v{version}", (0, 1, 2), version=min(version, 9))))
        # (the leader epoch is committed from v6 on, fetched from v5 on)
        epoch = 3 if version >= 6 else -1
        assert fetched[0] == (10 + version, epoch, "m0", E.NONE), version
        assert fetched[2][:2] == (-1, -1), version
    every = committed(await call(broker, fetch("v9", None)))
    assert sorted(every) == [0, 1]


async def test_unknown_topics_partitions_and_metadata_size(broker: Any) -> None:
    got = await call(broker, commit("g", {0: 1, 7: 1}))
    assert [(p.partition_index, p.error_code) for p in got.topics[0].partitions] == [(0, E.NONE), (7, E.UNKNOWN_TOPIC_OR_PARTITION)]
    got = await call(broker, commit("g", {0: 1}, topic="nope"))
    assert got.topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    big = oc.OffsetCommitRequest(group_id="g", topics=(oc.OffsetCommitRequestTopic(TOPIC, (
        oc.OffsetCommitRequestPartition(0, 5, committed_metadata="x" * 4097), oc.OffsetCommitRequestPartition(1, 6, committed_metadata=None))),))  # fmt: skip
    got = await call(broker, big)
    assert [p.error_code for p in got.topics[0].partitions] == [E.OFFSET_METADATA_TOO_LARGE, E.NONE]
    assert committed(await call(broker, fetch("g", (0, 1))))[1][:3] == (6, -1, "")


async def test_unknown_group_with_a_generation(broker: Any) -> None:
    for version, error in ((8, E.ILLEGAL_GENERATION), (9, E.GROUP_ID_NOT_FOUND)):
        got = await call(broker, commit("nobody-joined", {0: 1}, version=version, generation_id_or_member_epoch=4, member_id="m"))
        assert got.topics[0].partitions[0].error_code == error


async def test_authorization(broker: Any) -> None:
    denied = await call(broker, commit("g", {0: 1}), VIEWER)
    assert denied.topics[0].partitions[0].error_code == E.GROUP_AUTHORIZATION_FAILED
    assert (await call(broker, commit("g", {0: 4}), READER)).topics[0].partitions[0].error_code == E.NONE
    # (the viewer may describe the group, not the topic: its offsets are hidden or refused)
    assert committed(await call(broker, fetch("g", (0,)), VIEWER)) == {0: (-1, -1, "", E.TOPIC_AUTHORIZATION_FAILED)}
    assert committed(await call(broker, fetch("g", None), VIEWER)) == {}
    assert (await call(broker, fetch("g", (0,)), NOBODY)).groups[0].error_code == E.GROUP_AUTHORIZATION_FAILED
    v1 = await call(broker, fetch("g", (0,), version=1), NOBODY)
    assert committed(v1) == {0: (-1, -1, "", E.GROUP_AUTHORIZATION_FAILED)}  # (before v2: on each partition)
    delete = od.OffsetDeleteRequest(group_id="g", topics=(od.OffsetDeleteRequestTopic(TOPIC, (od.OffsetDeleteRequestPartition(0),)),))
    assert (await call(broker, delete, READER)).error_code == E.GROUP_AUTHORIZATION_FAILED
    done = await call(broker, delete, CLEANER)
    assert (done.error_code, done.topics[0].partitions[0].error_code) == (E.NONE, E.NONE)
    assert committed(await call(broker, fetch("g", (0,))))[0][0] == -1
    txn = tc.TxnOffsetCommitRequest(transactional_id="tx", group_id="g", producer_id=1, producer_epoch=0,
                                    topics=(tc.TxnOffsetCommitRequestTopic(TOPIC, (tc.TxnOffsetCommitRequestPartition(0, 1),)),))  # fmt: skip
    assert (await call(broker, txn, READER)).topics[0].partitions[0].error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


async def test_offset_delete_of_an_unknown_group(broker: Any) -> None:
    delete = od.OffsetDeleteRequest(group_id="ghost", topics=(od.OffsetDeleteRequestTopic(TOPIC, (od.OffsetDeleteRequestPartition(0),)),))
    assert (await call(broker, delete)).error_code == E.GROUP_ID_NOT_FOUND
    assert (await call(broker, delete._replace(group_id=""))).error_code == E.INVALID_GROUP_ID


async def test_group_lag_reaches_the_metrics(broker: Any) -> None:
    b, principals = broker
    conn = await principals.connect(b.port(PLAINTEXT), ADMIN)
    try:
        assert (await produce(conn, 0, batch([b"a", b"b", b"c", b"d", b"e"]))).error_code == E.NONE
    finally:
        conn.close()
    assert (await call(broker, commit("lagging", {0: 2, 1: 0}))).topics[0].partitions[0].error_code == E.NONE
    samples = {
        (s.name, s.labels.get("group"), s.labels.get("partition")): s.value
        for family in BrokerCollector(b.state).collect()
        for s in family.samples
        if s.name.startswith("kmeta_broker_group_")
    }
    assert samples[("kmeta_broker_group_committed_offset", "lagging", "0")] == 2
    assert samples[("kmeta_broker_group_lag", "lagging", "0")] == 3  # (high watermark 5)
    assert samples[("kmeta_broker_group_lag", "lagging", "1")] == 0
    assert samples[("kmeta_broker_group_lag_unknown_partitions", None, None)] == 0


async def test_transactional_offsets_stay_pending(broker: Any) -> None:
    txn = tc.TxnOffsetCommitRequest(
        transactional_id="tx", group_id="txg", producer_id=4000, producer_epoch=0,
        topics=(tc.TxnOffsetCommitRequestTopic(TOPIC, (tc.TxnOffsetCommitRequestPartition(0, 8, committed_metadata="t"),)),),
    )  # fmt: skip
    assert (await call(broker, txn)).topics[0].partitions[0].error_code == E.NONE
    # (until the transaction's COMMIT marker reaches __consumer_offsets: not committed)
    assert committed(await call(broker, fetch("txg", (0,)))) == {0: (-1, -1, "", E.NONE)}
    assert committed(await call(broker, fetch("txg", (0,), stable=True))) == {0: (-1, -1, "", E.UNSTABLE_OFFSET_COMMIT)}
    assert committed(await call(broker, fetch("txg", (0,), version=7, stable=True)))[0][3] == E.UNSTABLE_OFFSET_COMMIT
    assert (await call(broker, txn._replace(group_id=""))).topics[0].partitions[0].error_code == E.INVALID_GROUP_ID
