"""Issue 32, point 1: a forwarded admin request is authorized by the controller as the client
that sent it (the broker sends its principal in an Envelope), so a gap in a broker's own check
grants nothing. The reproduction: 30 fresh topics, a principal with only DESCRIBE on them
deleting them by topic id (DeleteTopics v6) through each broker, one of which has not
learned the new topics (its metadata updates are dropped: the ids are unknown to it, and it
forwards them). Before the Envelope it forwarded them over its own super-user connection
and the controller deleted them."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from kmeta.net.connection import KafkaConnection
from kmeta.net.security.sasl_client import ClientCredential, authenticate
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import delete_topics as dt
from kmeta.protocol.messages import metadata as md
from kmeta.testing import Cluster

pytestmark = pytest.mark.e2e

TOPICS = [f"fresh-{i:02d}" for i in range(30)]
EVE = ClientCredential("eve", "eve-secret-1234")


async def _open(address: tuple[str, int], credential: ClientCredential) -> KafkaConnection:
    conn = await KafkaConnection.open(*address, client_id="trust-test", timeout_s=10.0)
    await authenticate(conn, credential)
    return conn


async def _create(address: tuple[str, int], admin: ClientCredential) -> dict[str, uuid.UUID]:
    """The 30 topics (on brokers 1 and 2), as the admin; their ids from the answer (v7)."""
    conn = await _open(address, admin)
    try:
        topics = tuple(
            ct.CreatableTopic(name=name, num_partitions=-1, replication_factor=-1,
                              assignments=(ct.CreatableReplicaAssignment(0, (1, 2)),))
            for name in TOPICS
        )  # fmt: skip
        answer = await conn.request(ct.CreateTopicsRequest(version=7, topics=topics, timeout_ms=0), 20.0)
    finally:
        conn.close()
    assert {t.name: t.error_code for t in answer.topics} == dict.fromkeys(TOPICS, 0)
    return {t.name: t.topic_id for t in answer.topics}


async def _delete_by_id(address: tuple[str, int], ids: list[uuid.UUID]) -> list[tuple[str | None, uuid.UUID, int]]:
    conn = await _open(address, EVE)
    try:
        request = dt.DeleteTopicsRequest(
            version=6, topics=tuple(dt.DeleteTopicState(name=None, topic_id=i) for i in ids), timeout_ms=5000
        )
        answer = await conn.request(request, 20.0)
    finally:
        conn.close()
    return [(r.name, r.topic_id, r.error_code) for r in answer.responses]


async def _known_ids(address: tuple[str, int], admin: ClientCredential) -> set[uuid.UUID]:
    conn = await _open(address, admin)
    try:
        answer = await conn.request(md.MetadataRequest(version=12, topics=None), 10.0)
    finally:
        conn.close()
    return {t.topic_id for t in answer.topics}


async def _eve_sees(address: tuple[str, int], topic: str) -> bool:
    """Eve can authenticate at ``address`` and that broker lets her DESCRIBE ``topic`` (its
    SCRAM user and ACLs arrived)."""
    try:
        conn = await _open(address, EVE)
    except Exception:  # (not yet: the credential has not reached that broker)
        return False
    try:
        name = md.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=topic)
        answer = await conn.request(md.MetadataRequest(version=12, topics=(name,), allow_auto_topic_creation=False), 10.0)
    finally:
        conn.close()
    return answer.topics[0].error_code != ErrorCode.TOPIC_AUTHORIZATION_FAILED


@pytest.mark.timeout(90)
def test_a_describe_only_principal_deletes_nothing_by_id_through_any_broker(tmp_path: Path) -> None:
    with Cluster(3, secure=True, barrier=False, parent_dir=tmp_path) as cluster:
        admin_credential = cluster.sasl_credential
        assert admin_credential is not None
        admin = AdminClient(cluster.client_config())
        upsert = UserScramCredentialUpsertion(
            EVE.username, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), EVE.password.encode()
        )
        admin.alter_user_scram_credentials([upsert])[EVE.username].result(15)
        describe = AclBinding(ResourceType.TOPIC, "fresh-", ResourcePatternType.PREFIXED, "User:eve", "*",
                              AclOperation.DESCRIBE, AclPermissionType.ALLOW)  # fmt: skip
        for future in admin.create_acls([describe]).values():
            future.result(15)
        deadline = time.monotonic() + 15
        while not all(asyncio.run(_eve_sees(cluster.address(b), "fresh-none")) for b in (1, 2, 3)):
            assert time.monotonic() < deadline, "eve's credential and ACL did not reach every broker"
            time.sleep(0.2)
        cluster.fault(3, drop=True)  # broker 3 learns of no new topic: their ids are unknown to it

        ids = asyncio.run(_create(cluster.address(1), admin_credential))
        fresh = set(ids.values())
        deadline = time.monotonic() + 10
        while not fresh <= asyncio.run(_known_ids(cluster.address(1), admin_credential)):
            assert time.monotonic() < deadline, "broker 1 did not learn the topics"
            time.sleep(0.2)
        assert not fresh & asyncio.run(_known_ids(cluster.address(3), admin_credential))

        # all 30 in one request through each broker, then one at a time through broker 3
        # (the one that does not know them), and an id no broker knows
        answers = [asyncio.run(_delete_by_id(cluster.address(b), list(ids.values()))) for b in (1, 2, 3)]
        answers += [asyncio.run(_delete_by_id(cluster.address(3), [i])) for i in ids.values()]
        every = [entry for answer in answers for entry in answer]
        assert len(every) == 3 * 30 + 30
        assert {code for _, _, code in every} == {ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        assert all(name is None for name, _, _ in every)  # (by id: revealing nothing)
        assert {topic_id for _, topic_id, _ in every} == fresh
        nobody = uuid.uuid4()
        assert asyncio.run(_delete_by_id(cluster.address(3), [nobody])) == [(None, nobody, ErrorCode.UNKNOWN_TOPIC_ID)]

        time.sleep(1.0)  # (a deletion would have reached broker 1 by now)
        assert fresh <= asyncio.run(_known_ids(cluster.address(1), admin_credential))
        cluster.clear_faults()
        # the admin (a super user) still deletes by id through broker 3, which forwards it
        assert cluster.sasl_credential is not None
        gone = asyncio.run(_delete_as(cluster.address(3), admin_credential, ids[TOPICS[0]]))
        assert gone == [(TOPICS[0], ids[TOPICS[0]], 0)]


async def _delete_as(address: tuple[str, int], who: ClientCredential, topic_id: uuid.UUID) -> list[tuple[str | None, uuid.UUID, int]]:
    conn = await _open(address, who)
    try:
        request = dt.DeleteTopicsRequest(version=6, topics=(dt.DeleteTopicState(name=None, topic_id=topic_id),), timeout_ms=5000)
        answer = await conn.request(request, 20.0)
    finally:
        conn.close()
    return [(r.name, r.topic_id, r.error_code) for r in answer.responses]
