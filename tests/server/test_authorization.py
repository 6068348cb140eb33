"""Kafka's authorization outcomes on the client APIs, over real connections to in-process
brokers with --authorizer acl (principals set per connection as an authenticator sets them):
Metadata hides what a principal may not DESCRIBE (and is never answered from another
principal's memo), CreateTopics / CreatePartitions / DeleteTopics answer
TOPIC_AUTHORIZATION_FAILED per topic and forward only the rest."""

from __future__ import annotations

import pytest

from kmeta.net.security.acl import AclOperation as Op
from kmeta.net.security.authorizer import AuthorizerConfig, parse_super_users
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.errors import ErrorCode as E
from kmeta.protocol.messages import create_acls as ca
from kmeta.protocol.messages import create_partitions as cp
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import delete_topics as dt
from kmeta.protocol.messages import metadata as md
from tests.controller.helpers import InProcessCluster, start_cluster, wait_until
from tests.server.principals import QueuedPrincipals, user

AUTHZ = AuthorizerConfig(True, parse_super_users("User:ANONYMOUS;User:admin"))
ADMIN, ALICE, BOB, CAROL = user("admin"), user("alice"), user("bob"), user("carol")
TOPIC, CLUSTER, LITERAL, PREFIXED, ALLOW = 2, 4, 3, 4, 3


class Client:
    def __init__(self, c: InProcessCluster, principals: QueuedPrincipals) -> None:
        self.c, self.principals = c, principals

    async def call(self, who, request, broker: int = 1):
        conn = await self.principals.connect(self.c.client_port(broker), who)
        try:
            return await conn.request(request, 10.0)
        finally:
            conn.close()

    async def grant(self, principal: str, op: int, name: str, pattern: int = LITERAL, rtype: int = TOPIC) -> None:
        acl = ca.AclCreation(rtype, name, pattern, principal, "*", op, ALLOW)
        answer = await self.call(ADMIN, ca.CreateAclsRequest(version=3, creations=(acl,)))
        assert answer.results[0].error_code == 0

    async def create(self, who, *names: str):
        topics = tuple(ct.CreatableTopic(name=n, num_partitions=1, replication_factor=2) for n in names)
        answer = await self.call(who, ct.CreateTopicsRequest(version=7, topics=topics, timeout_ms=5000))
        return {t.name: (t.error_code, t.error_message) for t in answer.topics}


@pytest.fixture
async def client(tmp_path):
    c = await start_cluster(tmp_path, brokers=2, broker_overrides={"authorizer": AUTHZ}, authorizer=AUTHZ)
    principals = QueuedPrincipals()
    for b in c.brokers.values():
        for lst in b.listeners:
            if not lst.info.is_control:
                principals.attach(lst)
    cl = Client(c, principals)
    assert await cl.create(ADMIN, "pay-1", "pay-2", "secret") == dict.fromkeys(("pay-1", "pay-2", "secret"), (0, None))
    await cl.grant("User:alice", Op.DESCRIBE, "pay", PREFIXED)
    await cl.grant("User:alice", Op.ALTER, "pay-1")
    await cl.grant("User:alice", Op.DELETE, "pay-2")
    await cl.grant("User:alice", Op.CREATE, "alice-")  # literal: only the topic named "alice-"
    await cl.grant("User:bob", Op.CREATE, "kafka-cluster", rtype=CLUSTER)
    try:
        yield cl
    finally:
        await c.stop()


def metadata(names=None, version: int = 12, ops: bool = True, ids=(), auto: bool = False):
    """(``auto``: allow_auto_topic_creation, which the describe tests leave off: auto-creation
    answers unknown topics by CREATE, test_metadata_auto_creation_needs_create)"""
    topics = None
    if names is not None or ids:
        topics = tuple(md.MetadataRequestTopic(ZERO_UUID, n) for n in names or ()) + tuple(
            md.MetadataRequestTopic(i, None) for i in ids
        )
    return md.MetadataRequest(
        version=version, topics=topics, include_topic_authorized_operations=ops, allow_auto_topic_creation=auto
    )


async def test_metadata_shows_only_what_the_principal_may_describe(client):
    everything = await client.call(ADMIN, metadata())
    assert sorted(t.name for t in everything.topics) == ["pay-1", "pay-2", "secret"]
    ids = {t.name: t.topic_id for t in everything.topics}
    mine = await client.call(ALICE, metadata())
    assert sorted(t.name for t in mine.topics) == ["pay-1", "pay-2"]
    ops = {t.name: t.topic_authorized_operations for t in mine.topics}
    assert ops["pay-1"] == (1 << Op.DESCRIBE) | (1 << Op.ALTER)
    assert ops["pay-2"] == (1 << Op.DESCRIBE) | (1 << Op.DELETE)
    assert (await client.call(CAROL, metadata())).topics == ()
    # named: TOPIC_AUTHORIZATION_FAILED whether the topic exists or not
    named = await client.call(ALICE, metadata(["secret", "no-such-topic", "pay-1", "pay-9"]))
    assert [(t.name, t.error_code, t.partitions) for t in named.topics[:2]] == [
        ("secret", E.TOPIC_AUTHORIZATION_FAILED, ()), ("no-such-topic", E.TOPIC_AUTHORIZATION_FAILED, ()),
    ]  # fmt: skip
    assert named.topics[0].topic_id == ZERO_UUID  # the id is not revealed either
    assert [(t.name, t.error_code) for t in named.topics[2:]] == [("pay-1", 0), ("pay-9", E.UNKNOWN_TOPIC_OR_PARTITION)]
    by_id = await client.call(ALICE, metadata(ids=[ids["secret"], ids["pay-2"]]))
    assert [(t.name, t.topic_id, t.error_code) for t in by_id.topics] == [
        (None, ids["secret"], E.TOPIC_AUTHORIZATION_FAILED), ("pay-2", ids["pay-2"], 0),
    ]  # fmt: skip
    # v1 all-topics and v0's empty list too
    assert sorted(t.name for t in (await client.call(ALICE, metadata(version=1, ops=False))).topics) == ["pay-1", "pay-2"]
    assert sorted(t.name for t in (await client.call(ALICE, md.MetadataRequest(version=0, topics=()))).topics) == ["pay-1", "pay-2"]


async def test_metadata_auto_creation_needs_create(client):
    """Kafka's handleTopicMetadataRequest: an unknown topic a Metadata request may auto-create
    needs CREATE on the cluster or on itself, else TOPIC_AUTHORIZATION_FAILED; DESCRIBE is
    checked first (carol may describe nothing)."""
    await client.grant("User:carol", Op.CREATE, "kafka-cluster", rtype=CLUSTER)
    named = await client.call(ALICE, metadata(["pay-9", "alice-"], auto=True))
    assert [(t.name, t.error_code) for t in named.topics] == [
        ("pay-9", E.TOPIC_AUTHORIZATION_FAILED), ("alice-", E.TOPIC_AUTHORIZATION_FAILED),
    ]  # (alice may create "alice-" but not describe it)
    await client.grant("User:alice", Op.DESCRIBE, "alice-")
    named = await client.call(ALICE, metadata(["pay-9", "alice-"], auto=True))
    assert [(t.name, t.error_code) for t in named.topics] == [
        ("pay-9", E.TOPIC_AUTHORIZATION_FAILED), ("alice-", E.LEADER_NOT_AVAILABLE),
    ]  # fmt: skip
    assert (await client.call(CAROL, metadata(["carol-1"], auto=True))).topics[0].error_code == (
        E.TOPIC_AUTHORIZATION_FAILED
    )
    await wait_until(lambda: all("alice-" in b.cache.snapshot.partition_states for b in client.c.brokers.values()), 10.0)
    assert "pay-9" not in client.c.brokers[1].cache.snapshot.partition_states


async def test_metadata_answers_follow_acl_changes_on_one_connection(client):
    conn = await client.principals.connect(client.c.client_port(2), ALICE)
    try:
        request = metadata(ops=False)
        for _ in range(3):  # repeated: the memo path must not serve another principal's answer
            assert sorted(t.name for t in (await conn.request(request, 10.0)).topics) == ["pay-1", "pay-2"]
        await client.grant("User:alice", Op.READ, "secret")  # no new snapshot, new ACLs
        assert sorted(t.name for t in (await conn.request(request, 10.0)).topics) == ["pay-1", "pay-2", "secret"]
    finally:
        conn.close()
    admin = await client.call(ADMIN, request, broker=2)  # and the admin never got alice's answer
    assert len(admin.topics) == 3


async def test_create_topics_per_topic_and_cluster_create(client):
    answer = await client.create(ALICE, "alice-", "other", "secret")
    assert answer == {
        "alice-": (0, None),
        "other": (E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."),
        "secret": (E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."),  # (not TOPIC_ALREADY_EXISTS)
    }
    assert list(answer) == ["alice-", "other", "secret"]  # the request's order
    names = {t.name for t in (await client.call(ADMIN, metadata())).topics}
    assert "alice-" in names
    assert "other" not in names
    # CREATE on the cluster: any topic
    assert await client.create(BOB, "bobs", "more") == {"bobs": (0, None), "more": (0, None)}
    # v5+: configs only with DESCRIBE_CONFIGS on the topic
    topics = (ct.CreatableTopic(name="quiet", num_partitions=1, replication_factor=1),)
    quiet = (await client.call(BOB, ct.CreateTopicsRequest(version=7, topics=topics, timeout_ms=5000))).topics[0]
    assert (quiet.error_code, quiet.topic_config_error_code, quiet.configs) == (0, E.TOPIC_AUTHORIZATION_FAILED, ())
    topics = (ct.CreatableTopic(name="loud", num_partitions=1, replication_factor=1),)
    loud = (await client.call(ADMIN, ct.CreateTopicsRequest(version=7, topics=topics, timeout_ms=5000))).topics[0]
    assert loud.topic_config_error_code == 0
    assert loud.configs


async def test_create_partitions_and_delete_topics_per_topic(client):
    grow = cp.CreatePartitionsRequest(version=3, topics=(
        cp.CreatePartitionsTopic("pay-1", 2, None), cp.CreatePartitionsTopic("pay-2", 2, None),
    ), timeout_ms=5000, validate_only=False)  # fmt: skip
    answer = await client.call(ALICE, grow)
    assert [(r.name, r.error_code) for r in answer.results] == [("pay-1", 0), ("pay-2", E.TOPIC_AUTHORIZATION_FAILED)]
    c = client.c
    await wait_until(lambda: len(c.brokers[2].cache.snapshot.partition_states["pay-1"]) == 2, 5.0)
    assert len(c.brokers[2].cache.snapshot.partition_states["pay-2"]) == 1

    ids = {t.name: t.topic_id for t in (await client.call(ADMIN, metadata())).topics}
    by_name = await client.call(ALICE, dt.DeleteTopicsRequest(version=5, topic_names=("secret", "pay-1", "pay-2"), timeout_ms=5000))
    assert [(r.name, r.error_code) for r in by_name.responses] == [
        ("secret", E.TOPIC_AUTHORIZATION_FAILED), ("pay-1", E.TOPIC_AUTHORIZATION_FAILED), ("pay-2", 0),
    ]  # fmt: skip
    by_id = await client.call(ALICE, dt.DeleteTopicsRequest(version=6, topics=(dt.DeleteTopicState(None, ids["secret"]),), timeout_ms=5000))
    assert [(r.name, r.topic_id, r.error_code) for r in by_id.responses] == [(None, ids["secret"], E.TOPIC_AUTHORIZATION_FAILED)]
    left = {t.name for t in (await client.call(ADMIN, metadata())).topics}
    assert {"secret", "pay-1"} <= left
    assert "pay-2" not in left


async def test_config_and_cluster_admin_apis(client):
    from kmeta.protocol.messages import alter_partition_reassignments as apr
    from kmeta.protocol.messages import describe_configs as dcf
    from kmeta.protocol.messages import describe_topic_partitions as dtp
    from kmeta.protocol.messages import elect_leaders as el
    from kmeta.protocol.messages import incremental_alter_configs as iac
    from kmeta.protocol.messages import list_partition_reassignments as lpr

    def describe(*resources):
        return dcf.DescribeConfigsRequest(
            version=4, resources=tuple(dcf.DescribeConfigsResource(k, n, None) for k, n in resources)
        )

    got = await client.call(ALICE, describe((2, "pay-1"), (2, "secret"), (4, "1")))
    assert [(r.resource_name, r.error_code, len(r.configs) > 0) for r in got.results] == [
        ("pay-1", E.TOPIC_AUTHORIZATION_FAILED, False), ("secret", E.TOPIC_AUTHORIZATION_FAILED, False),
        ("1", E.CLUSTER_AUTHORIZATION_FAILED, False),
    ]  # fmt: skip
    await client.grant("User:alice", Op.ALTER_CONFIGS, "pay-1")  # implies DESCRIBE_CONFIGS
    got = await client.call(ALICE, describe((2, "pay-1")))
    assert (got.results[0].error_code, len(got.results[0].configs) > 0) == (0, True)

    alter = iac.IncrementalAlterConfigsRequest(version=1, resources=(
        iac.AlterConfigsResource(2, "secret", (iac.AlterableConfig("retention.ms", 0, "1000"),)),
        iac.AlterConfigsResource(2, "pay-1", (iac.AlterableConfig("retention.ms", 0, "2000"),)),
    ), validate_only=False)  # fmt: skip
    answer = await client.call(ALICE, alter)
    assert [(r.resource_name, r.error_code) for r in answer.responses] == [("secret", E.TOPIC_AUTHORIZATION_FAILED), ("pay-1", 0)]
    snap = client.c.brokers[2].cache.snapshot
    assert snap.topic_configs.get("pay-1") == {"retention.ms": "2000"}
    assert "secret" not in snap.topic_configs

    elect = el.ElectLeadersRequest(version=2, election_type=0, topic_partitions=(el.TopicPartitions("pay-1", (0,)),), timeout_ms=5000)
    refused = await client.call(ALICE, elect)
    assert refused.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert refused.replica_election_results[0].partition_result[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    listing = await client.call(ALICE, lpr.ListPartitionReassignmentsRequest(version=0, timeout_ms=5000, topics=None))
    assert listing.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    move = apr.AlterPartitionReassignmentsRequest(version=0, timeout_ms=5000, topics=(
        apr.ReassignableTopic("pay-1", (apr.ReassignablePartition(0, (1, 2)),)),
    ))  # fmt: skip
    assert (await client.call(ALICE, move)).error_code == E.CLUSTER_AUTHORIZATION_FAILED
    admin_listing = await client.call(ADMIN, lpr.ListPartitionReassignmentsRequest(version=0, timeout_ms=5000, topics=None))
    assert admin_listing.error_code == 0

    everything = await client.call(ALICE, dtp.DescribeTopicPartitionsRequest(version=0, topics=()))
    assert [t.name for t in everything.topics] == ["pay-1", "pay-2"]
    named = await client.call(ALICE, dtp.DescribeTopicPartitionsRequest(version=0, topics=(dtp.TopicRequest("secret"), dtp.TopicRequest("pay-2"))))
    assert [(t.name, t.error_code) for t in named.topics] == [("pay-2", 0), ("secret", E.TOPIC_AUTHORIZATION_FAILED)]
    assert named.topics[0].topic_authorized_operations == (1 << Op.DESCRIBE) | (1 << Op.DELETE)


async def test_wildcards_and_deny_on_the_apis(client):
    # carol: DESCRIBE on every topic (LITERAL "*"), but a DENY on "secret" wins
    await client.grant("User:carol", Op.DESCRIBE, "*")
    deny = ca.AclCreation(TOPIC, "secret", LITERAL, "User:carol", "*", Op.ALL, 2)
    assert (await client.call(ADMIN, ca.CreateAclsRequest(version=3, creations=(deny,)))).results[0].error_code == 0
    seen = await client.call(CAROL, metadata(ops=False))
    assert sorted(t.name for t in seen.topics) == ["pay-1", "pay-2"]
    named = await client.call(CAROL, metadata(["secret"], ops=False))
    assert named.topics[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    # everyone (User:*) may create topics starting with "shared-" (PREFIXED), nothing else
    await client.grant("User:*", Op.CREATE, "shared-", PREFIXED)
    answer = await client.create(CAROL, "shared-1", "private-1")
    assert answer == {"shared-1": (0, None), "private-1": (E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")}
    # a host other than the client's (127.0.0.1) grants nothing
    await client.grant("User:dave", Op.DESCRIBE, "*")
    host_only = ca.AclCreation(TOPIC, "*", LITERAL, "User:erin", "10.1.2.3", Op.DESCRIBE, ALLOW)
    assert (await client.call(ADMIN, ca.CreateAclsRequest(version=3, creations=(host_only,)))).results[0].error_code == 0
    assert len((await client.call(user("dave"), metadata(ops=False))).topics) == 4
    assert (await client.call(user("erin"), metadata(ops=False))).topics == ()


async def test_describe_cluster_reports_the_principals_cluster_operations(client):
    from kmeta.protocol.messages import describe_cluster as dc

    request = dc.DescribeClusterRequest(version=1, include_cluster_authorized_operations=True, endpoint_type=1)
    assert (await client.call(BOB, request)).cluster_authorized_operations == 1 << Op.CREATE
    assert (await client.call(CAROL, request)).cluster_authorized_operations == 0
    everything = (await client.call(ADMIN, request)).cluster_authorized_operations
    assert everything == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


async def test_scram_credential_apis_need_alter_and_describe_on_the_cluster(client):
    from kmeta.protocol.messages import alter_user_scram_credentials as aus
    from kmeta.protocol.messages import describe_user_scram_credentials as dus

    up = aus.ScramCredentialUpsertion("mallory", 2, 4096, b"s" * 16, b"p" * 64)  # SCRAM-SHA-512
    refused = await client.call(ALICE, aus.AlterUserScramCredentialsRequest(version=0, deletions=(), upsertions=(up,)))
    assert [(r.user, r.error_code) for r in refused.results] == [("mallory", E.CLUSTER_AUTHORIZATION_FAILED)]
    assert "mallory" not in client.c.brokers[1].state.credentials.users
    asked = dus.DescribeUserScramCredentialsRequest(version=0, users=(dus.UserName("bob"),))
    denied = await client.call(ALICE, asked)
    assert denied.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert [(r.user, r.error_code) for r in denied.results] == [("", E.CLUSTER_AUTHORIZATION_FAILED)]  # Kafka's shape
    made = await client.call(ADMIN, aus.AlterUserScramCredentialsRequest(version=0, deletions=(), upsertions=(up,)))
    assert made.results[0].error_code == 0
    await wait_until(lambda: "mallory" in client.c.brokers[1].state.credentials.users, 5.0)
    shown = await client.call(ADMIN, dus.DescribeUserScramCredentialsRequest(version=0, users=(dus.UserName("mallory"),)))
    assert (shown.error_code, shown.results[0].user, shown.results[0].error_code) == (0, "mallory", 0)
