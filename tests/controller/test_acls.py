"""ACLs end to end in one process: CreateAcls / DescribeAcls / DeleteAcls sent to real
brokers over loopback, forwarded to a real controller, durable in its store, pushed to every
broker (kmeta's tagged field on UpdateMetadata) and back after a restart of everything."""

from __future__ import annotations

from pathlib import Path

import pytest

from kmeta.controller.store.sqlite_store import ControllerStore
from kmeta.net.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kmeta.net.security.authorizer import AuthorizerConfig, parse_super_users
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_acls as ca
from kmeta.protocol.messages import delete_acls as dla
from kmeta.protocol.messages import describe_acls as dsa
from tests.controller.helpers import InProcessCluster, start_cluster
from tests.server.principals import QueuedPrincipals, user

E, Op, P = ErrorCode, AclOperation, PatternType
T, C = ResourceType.TOPIC, ResourceType.CLUSTER
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
#: the controller and brokers reach each other as ANONYMOUS here (no SASL in this test):
#: a super user, as `kmeta cluster up` makes the cluster's own principal
AUTHZ = AuthorizerConfig(True, parse_super_users("User:ANONYMOUS;User:admin"))
ADMIN, ALICE = user("admin"), user("alice")


async def start(data_dir: Path, authorizer: AuthorizerConfig = AUTHZ) -> tuple[InProcessCluster, QueuedPrincipals]:
    c = await start_cluster(data_dir, brokers=2, broker_overrides={"authorizer": authorizer}, authorizer=authorizer)
    principals = QueuedPrincipals()
    for b in c.brokers.values():
        for lst in b.listeners:
            if not lst.info.is_control:
                principals.attach(lst)
    return c, principals


@pytest.fixture
async def cluster(tmp_path):
    c, principals = await start(tmp_path)
    try:
        yield c, principals
    finally:
        await c.stop()


async def call(c: InProcessCluster, principals: QueuedPrincipals, request, who=ADMIN, broker: int = 1):
    conn = await principals.connect(c.client_port(broker), who)
    try:
        return await conn.request(request, 10.0)
    finally:
        conn.close()


def creation(name, op, perm=ALLOW, principal="User:alice", pattern=P.LITERAL, rtype=T, host="*"):
    return ca.AclCreation(rtype, name, pattern, principal, host, op, perm)


def describe_all(version: int = 3, **kw):
    fields = {"resource_type_filter": ResourceType.ANY, "resource_name_filter": None, "pattern_type_filter": P.ANY,
                  "principal_filter": None, "host_filter": None, "operation": Op.ANY, "permission_type": AclPermissionType.ANY}  # fmt: skip
    fields.update(kw)
    return dsa.DescribeAclsRequest(version=version, **fields)


def described(response) -> set[tuple]:
    return {
        (r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type)
        for r in response.resources
        for a in r.acls
    }


async def test_create_describe_delete_on_every_broker(cluster):
    c, principals = cluster
    created = await call(c, principals, ca.CreateAclsRequest(version=3, creations=(
        creation("pay", Op.DESCRIBE, pattern=P.PREFIXED),
        creation("orders", Op.ALL, DENY),
        creation("kafka-cluster", Op.CREATE, rtype=C),
        creation("x", Op.READ, principal="alice"),  # no Type:
        creation("other", Op.READ, rtype=C),  # CLUSTER must be named kafka-cluster
        creation("y", Op.ANY),
        creation("pay", Op.DESCRIBE, pattern=P.PREFIXED),  # a duplicate: succeeds, kept once
    )))  # fmt: skip
    assert [r.error_code for r in created.results] == [0, 0, 0, E.INVALID_REQUEST, E.INVALID_REQUEST, E.INVALID_REQUEST, 0]
    assert "no colon" in created.results[3].error_message
    assert created.results[4].error_message == "The only valid name for the CLUSTER resource is kafka-cluster"
    assert created.results[5].error_message == "Invalid operation ANY"
    want = {
        (T, "pay", P.PREFIXED, "User:alice", "*", Op.DESCRIBE, ALLOW),
        (T, "orders", P.LITERAL, "User:alice", "*", Op.ALL, DENY),
        (C, "kafka-cluster", P.LITERAL, "User:alice", "*", Op.CREATE, ALLOW),
    }
    for broker in (1, 2):  # answered once every broker holds them
        got = await call(c, principals, describe_all(), broker=broker)
        assert got.error_code == 0
        assert described(got) == want
    # MATCH: the ACLs that apply to topic "payments"
    match = await call(c, principals, describe_all(resource_type_filter=T, resource_name_filter="payments", pattern_type_filter=P.MATCH))
    assert described(match) == {(T, "pay", P.PREFIXED, "User:alice", "*", Op.DESCRIBE, ALLOW)}
    v0 = await call(c, principals, describe_all(version=0))  # v0: LITERAL only
    assert {r.resource_name for r in v0.resources} == {"orders", "kafka-cluster"}

    deleted = await call(c, principals, dla.DeleteAclsRequest(version=3, filters=(
        dla.DeleteAclsFilter(T, None, P.ANY, "User:alice", None, Op.ANY, AclPermissionType.ANY),
        dla.DeleteAclsFilter(T, "nothing", P.LITERAL, None, None, Op.ANY, AclPermissionType.ANY),
        dla.DeleteAclsFilter(T, None, P.UNKNOWN, None, None, Op.ANY, AclPermissionType.ANY),
    )), broker=2)  # fmt: skip
    first, second, third = deleted.filter_results
    assert {m.resource_name for m in first.matching_acls} == {"pay", "orders"}
    assert (second.error_code, second.matching_acls) == (0, ())
    assert (third.error_code, third.error_message) == (E.INVALID_REQUEST, "Unknown patternFilter.")
    for broker in (1, 2):
        got = await call(c, principals, describe_all(), broker=broker)
        assert described(got) == {(C, "kafka-cluster", P.LITERAL, "User:alice", "*", Op.CREATE, ALLOW)}


async def test_acl_apis_need_alter_and_describe_on_the_cluster(cluster):
    c, principals = cluster
    refused = await call(c, principals, ca.CreateAclsRequest(version=3, creations=(creation("t", Op.READ),)), who=ALICE)
    assert refused.results[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert (await call(c, principals, describe_all(), who=ALICE)).error_code == E.CLUSTER_AUTHORIZATION_FAILED
    deny = dla.DeleteAclsRequest(version=3, filters=(dla.DeleteAclsFilter(1, None, 1, None, None, 1, 1),))
    assert (await call(c, principals, deny, who=ALICE)).filter_results[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    # granted DESCRIBE (through ALTER) on the cluster, alice may describe and create ACLs
    grant = ca.CreateAclsRequest(version=3, creations=(creation("kafka-cluster", Op.ALTER, rtype=C),))
    assert (await call(c, principals, grant)).results[0].error_code == 0
    assert (await call(c, principals, describe_all(), who=ALICE)).error_code == 0
    mine = ca.CreateAclsRequest(version=1, creations=(creation("t", Op.READ, principal="User:bob"),))
    assert (await call(c, principals, mine, who=ALICE)).results[0].error_code == 0
    assert c.controller.controller.state.acls >= {AclBinding(T, "t", P.LITERAL, "User:bob", "*", Op.READ, ALLOW)}


async def test_acls_survive_a_restart_and_reach_new_brokers(tmp_path):
    c, principals = await start(tmp_path)
    try:
        created = await call(c, principals, ca.CreateAclsRequest(version=2, creations=(creation("t", Op.WRITE),)))
        assert created.results[0].error_code == 0
    finally:
        await c.stop()
    store = ControllerStore(tmp_path)
    try:
        assert store.load().acls == {AclBinding(T, "t", P.LITERAL, "User:alice", "*", Op.WRITE, ALLOW)}
    finally:
        store.close()
    c, principals = await start(tmp_path)  # a new controller process and new brokers
    try:
        for b in c.brokers.values():  # in their first full UpdateMetadata
            assert b.state.authorizer is not None
            assert len(b.state.authorizer.acls) == 1
        got = await call(c, principals, describe_all(), broker=2)
        assert described(got) == {(T, "t", P.LITERAL, "User:alice", "*", Op.WRITE, ALLOW)}
    finally:
        await c.stop()


async def test_without_an_authorizer_the_acl_apis_are_security_disabled(tmp_path):
    c = await start_cluster(tmp_path, brokers=1)
    try:
        conn = await c.connect(1)
        try:
            got = await conn.request(describe_all(), 10.0)
            assert (got.error_code, got.error_message) == (E.SECURITY_DISABLED, "No Authorizer is configured on the broker")
            made = await conn.request(ca.CreateAclsRequest(version=3, creations=(creation("t", Op.READ),)), 10.0)
            assert made.results[0].error_code == E.SECURITY_DISABLED
        finally:
            conn.close()
        assert c.controller.controller.state.acls == set()
    finally:
        await c.stop()


async def test_a_refused_commit_keeps_no_acl(cluster):
    c, principals = cluster
    store = c.controller.controller.store
    store._db.execute("PRAGMA query_only = ON")  # the store refuses every write from now on
    try:
        made = await call(c, principals, ca.CreateAclsRequest(version=3, creations=(creation("t", Op.READ),)))
    finally:
        store._db.execute("PRAGMA query_only = OFF")
    assert made.results[0].error_code == E.KAFKA_STORAGE_ERROR
    assert c.controller.controller.state.acls == set()
    assert described(await call(c, principals, describe_all(), broker=2)) == set()
