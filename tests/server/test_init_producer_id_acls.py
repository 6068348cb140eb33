"""InitProducerId and idempotent Produce with ``--authorizer acl``, as Kafka 3.x authorizes
them (KafkaApis.handleInitProducerIdRequest, handleProduceRequest): in-process controller and
brokers, the client's principal set per connection as an authenticator sets it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kmeta.net.security.authorizer import AuthorizerConfig, parse_super_users
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_acls as ca
from kmeta.protocol.messages import init_producer_id as ip
from kmeta.server.broker import Broker
from kmeta.server.lifecycle.controller_link import controller_link
from tests.controller.helpers import (
    InProcessCluster,
    broker_config,
    create_request,
    start_controller,
    wait_until,
)
from tests.server.data_plane import batch, only, produce
from tests.server.principals import QueuedPrincipals, user

E = ErrorCode
ADMIN, MALLORY = user("kmeta-cluster"), user("mallory")
AUTHZ = AuthorizerConfig(True, parse_super_users("User:kmeta-cluster"))
#: ResourceType, PatternType, AclOperation, AclPermissionType codes
TOPIC, CLUSTER, TXN_ID, LITERAL, PREFIXED = 2, 4, 5, 3, 4
WRITE, DESCRIBE, IDEMPOTENT_WRITE, ALLOW = 4, 8, 12, 3


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[tuple[InProcessCluster, QueuedPrincipals]]:
    # the daemons reach each other as the cluster's principal (a super user), as SASL with
    # the cluster credential makes them; a client's connection is queued as its user
    control, clients = QueuedPrincipals(default=ADMIN), QueuedPrincipals(default=ADMIN)
    c = InProcessCluster(await start_controller(tmp_path, authorizer=AUTHZ))
    for lst in c.controller.listeners:
        control.attach(lst)
    broker = Broker(broker_config(1, c.controller.port, authorizer=AUTHZ), [controller_link])
    for lst in broker.listeners:
        (control if lst.info.is_control else clients).attach(lst)
    await broker.start()
    c.brokers[1] = broker
    await wait_until(lambda: len(broker.cache.snapshot.alive_brokers) == 1, 10.0)
    try:
        yield c, clients
    finally:
        await c.stop()


async def _as(clients: QueuedPrincipals, c: InProcessCluster, who: object, request: object) -> object:
    conn = await clients.connect(c.client_port(1), who)  # type: ignore[arg-type]
    try:
        return await conn.request(request, 10.0)  # type: ignore[arg-type]
    finally:
        conn.close()


async def _grant(c: InProcessCluster, clients: QueuedPrincipals, *acls: tuple[int, str, int, int]) -> None:
    creations = tuple(ca.AclCreation(rt, name, pt, "User:mallory", "*", op, ALLOW) for rt, name, pt, op in acls)
    answer = await _as(clients, c, ADMIN, ca.CreateAclsRequest(version=3, creations=creations))
    assert [r.error_code for r in answer.results] == [0] * len(acls)  # type: ignore[attr-defined]
    broker = c.brokers[1]
    await wait_until(lambda: len(broker.state.authorizer.acls) == len(c.controller.controller.state.acls), 5.0)  # type: ignore[union-attr]


def _init(txn: str | None = None) -> ip.InitProducerIdRequest:
    return ip.InitProducerIdRequest(version=4, transactional_id=txn, transaction_timeout_ms=60000)


async def test_init_producer_id_needs_idempotent_write_or_write_on_any_topic(secured) -> None:  # type: ignore[no-untyped-def]
    c, clients = secured
    refused = await _as(clients, c, MALLORY, _init())
    assert (refused.error_code, refused.producer_id, refused.producer_epoch) == (E.CLUSTER_AUTHORIZATION_FAILED, -1, -1)  # type: ignore[attr-defined]
    await _grant(c, clients, (TOPIC, "orders", LITERAL, DESCRIBE))  # DESCRIBE is no WRITE
    assert (await _as(clients, c, MALLORY, _init())).error_code == E.CLUSTER_AUTHORIZATION_FAILED  # type: ignore[attr-defined]
    # WRITE on some topic (here PREFIXED, on topics that need not exist): any will do
    await _grant(c, clients, (TOPIC, "pay", PREFIXED, WRITE))
    assert (await _as(clients, c, MALLORY, _init())).error_code == E.NONE  # type: ignore[attr-defined]
    # a transactional id needs WRITE on it, whatever mallory may do elsewhere
    txn = await _as(clients, c, MALLORY, _init("mallorys-txn"))
    assert (txn.error_code, txn.producer_id) == (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)  # type: ignore[attr-defined]
    await _grant(c, clients, (TXN_ID, "mallorys-txn", LITERAL, WRITE))
    # authorized: the coordinator's to answer (none here yet)
    assert (await _as(clients, c, MALLORY, _init("mallorys-txn"))).error_code == E.NOT_COORDINATOR  # type: ignore[attr-defined]


async def test_idempotent_write_on_the_cluster_alone(secured) -> None:  # type: ignore[no-untyped-def]
    """IDEMPOTENT_WRITE gets a producer id; the idempotent batches still need WRITE on their
    topic, and need nothing more (Kafka stopped asking IDEMPOTENT_WRITE of Produce in 2.8)."""
    c, clients = secured
    made = await _as(clients, c, ADMIN, create_request(("orders", [[1]])))
    assert made.topics[0].error_code == 0  # type: ignore[attr-defined]
    await wait_until(lambda: c.brokers[1].state.replica_manager.leader_partition_or_error("orders", 0)[0] is not None, 5.0)
    await _grant(c, clients, (CLUSTER, "kafka-cluster", LITERAL, IDEMPOTENT_WRITE))
    got = await _as(clients, c, MALLORY, _init())
    assert (got.error_code, got.producer_epoch) == (E.NONE, 0)  # type: ignore[attr-defined]
    pid = got.producer_id  # type: ignore[attr-defined]
    idempotent = produce("orders", 0, batch(2, producer_id=pid))
    assert only(await _as(clients, c, MALLORY, idempotent)).error_code == E.TOPIC_AUTHORIZATION_FAILED
    await _grant(c, clients, (TOPIC, "orders", LITERAL, WRITE))
    assert only(await _as(clients, c, MALLORY, idempotent)).error_code == E.NONE
