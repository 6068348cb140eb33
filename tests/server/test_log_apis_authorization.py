"""Kafka's authorization of the log APIs, over loopback with --authorizer acl (principals set
per connection as an authenticator sets them): ListOffsets needs DESCRIBE on the topic,
OffsetForLeaderEpoch CLUSTER_ACTION (a replica) or DESCRIBE (a consumer), DeleteRecords
DELETE, DescribeLogDirs DESCRIBE on the cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from kmeta.net.principal import KafkaPrincipal
from kmeta.net.security.acl import AclBinding, AclOperation, ResourceType
from kmeta.net.security.authorizer import AclSet, AuthorizerConfig, parse_super_users
from kmeta.protocol.errors import ErrorCode as E
from kmeta.protocol.messages import delete_records as dr
from kmeta.protocol.messages import describe_log_dirs as dld
from kmeta.protocol.messages import list_offsets as lo
from kmeta.protocol.messages import offset_for_leader_epoch as ofle
from kmeta.server.broker import Broker
from tests.server.helpers import PLAINTEXT
from tests.server.log_broker import TOPIC, batch, log_broker, produce
from tests.server.principals import QueuedPrincipals, user

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ADMIN, ALICE, BOB, CAROL = user("admin"), user("alice"), user("bob"), user("carol")
REPLICA, OPS = user("replica"), user("ops")
LITERAL, ALLOW = 3, 3


def acl(who: KafkaPrincipal, op: int, rtype: int = ResourceType.TOPIC, name: str = TOPIC) -> AclBinding:
    return AclBinding(rtype, name, LITERAL, str(who), "*", op, ALLOW)


@pytest.fixture
async def secured() -> AsyncIterator[tuple[Broker, QueuedPrincipals]]:
    # (the control listener's connections are ANONYMOUS: the controller's pushes need it)
    authz = AuthorizerConfig(True, parse_super_users("User:ANONYMOUS;User:admin"))
    async with log_broker(authorizer=authz) as b:
        assert b.state.authorizer is not None
        b.state.authorizer.replace(AclSet([
            acl(ALICE, AclOperation.DESCRIBE),
            acl(BOB, AclOperation.DELETE),
            acl(REPLICA, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster"),
            acl(OPS, AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"),
        ]))  # fmt: skip
        principals = QueuedPrincipals(default=ADMIN)
        for listener in b.listeners:
            if not listener.info.is_control:
                principals.attach(listener)
        conn = await principals.connect(b.port(PLAINTEXT), ADMIN)
        assert (await produce(conn, 0, batch([b"a", b"b"]))).error_code == 0
        conn.close()
        yield b, principals


async def call(secured: tuple[Broker, QueuedPrincipals], who: KafkaPrincipal, request: Any) -> Any:
    b, principals = secured
    conn = await principals.connect(b.port(PLAINTEXT), who)
    try:
        return await conn.request(request, 10)
    finally:
        conn.close()


async def test_list_offsets_needs_describe_on_the_topic(secured: Any) -> None:
    req = lo.ListOffsetsRequest(version=9, replica_id=-1, topics=(lo.ListOffsetsTopic(TOPIC, (lo.ListOffsetsPartition(0, -1, -1),)),))
    # (bob's DELETE implies DESCRIBE, as Kafka's ACLs do; carol has nothing)
    for who, error, offset in ((ALICE, E.NONE, 2), (BOB, E.NONE, 2), (CAROL, E.TOPIC_AUTHORIZATION_FAILED, -1)):
        for version in (0, 9):
            p = (await call(secured, who, req._replace(version=version))).topics[0].partitions[0]
            assert p.error_code == error
            if version:
                assert p.offset == offset


async def test_offset_for_leader_epoch_takes_cluster_action_or_describe(secured: Any) -> None:
    req = ofle.OffsetForLeaderEpochRequest(version=4, replica_id=-1, topics=(
        ofle.OffsetForLeaderTopic(TOPIC, (ofle.OffsetForLeaderPartition(0, -1, 5),)),))  # fmt: skip
    got = {}
    for who in (REPLICA, ALICE, CAROL):
        p = (await call(secured, who, req)).topics[0].partitions[0]
        got[who.name] = (p.error_code, p.end_offset)
    assert got == {"replica": (E.NONE, 2), "alice": (E.NONE, 2), "carol": (E.TOPIC_AUTHORIZATION_FAILED, -1)}


async def test_delete_records_needs_delete_on_the_topic(secured: Any) -> None:
    req = dr.DeleteRecordsRequest(version=2, timeout_ms=1000, topics=(dr.DeleteRecordsTopic(TOPIC, (dr.DeleteRecordsPartition(0, 1),)),))
    alice = (await call(secured, ALICE, req)).topics[0].partitions[0]
    bob = (await call(secured, BOB, req)).topics[0].partitions[0]
    assert (alice.error_code, alice.low_watermark) == (E.TOPIC_AUTHORIZATION_FAILED, -1)
    assert (bob.error_code, bob.low_watermark) == (E.NONE, 1)


async def test_describe_log_dirs_needs_describe_on_the_cluster(secured: Any) -> None:
    for version in (0, 3, 4):
        denied = await call(secured, ALICE, dld.DescribeLogDirsRequest(version=version, topics=None))
        assert denied.results == ()
        assert denied.error_code == (E.CLUSTER_AUTHORIZATION_FAILED if version >= 3 else 0)
        ok = await call(secured, OPS, dld.DescribeLogDirsRequest(version=version, topics=None))
        assert (ok.error_code, [r.log_dir for r in ok.results]) == (E.NONE, ["memory"])
