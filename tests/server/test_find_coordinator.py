"""FindCoordinator on an in-process broker over loopback (tests/server/coordinator_broker.py):
Kafka's ACL checks (DESCRIBE on the Group / TransactionalId), COORDINATOR_NOT_AVAILABLE
when the partition has no live leader on the request's listener or the topic cannot be
created, and the coordinator's endpoint on the listener the request came in on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from kmeta.net.connection import KafkaConnection
from kmeta.net.principal import KafkaPrincipal
from kmeta.net.security.acl import AclBinding, AclOperation, PatternType, ResourceType
from kmeta.net.security.authorizer import AclSet, AuthorizerConfig, parse_super_users
from kmeta.protocol.errors import ErrorCode as E
from kmeta.protocol.messages import find_coordinator as fc
from tests.server.coordinator_broker import PARTITIONS, TOPIC, Harness, coordinator_broker
from tests.server.helpers import PLAINTEXT, live_broker, partition, update_metadata
from tests.server.principals import QueuedPrincipals, user

ADMIN, ALICE, BOB = user("admin"), user("alice"), user("bob")
ALLOW = 3


def acl(who: KafkaPrincipal, rtype: int, name: str, pattern: int = PatternType.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, str(who), "*", AclOperation.DESCRIBE, ALLOW)


@pytest.fixture
async def secured() -> AsyncIterator[tuple[Harness, QueuedPrincipals]]:
    authz = AuthorizerConfig(True, parse_super_users("User:ANONYMOUS;User:admin"))
    async with coordinator_broker(authorizer=authz) as h:
        assert h.broker.state.authorizer is not None
        h.broker.state.authorizer.replace(AclSet([
            acl(ALICE, ResourceType.GROUP, "alice-", PatternType.PREFIXED),
            acl(BOB, ResourceType.TRANSACTIONAL_ID, "bob-txn"),
        ]))  # fmt: skip
        principals = QueuedPrincipals(default=ADMIN)
        for listener in h.broker.listeners:
            if not listener.info.is_control:
                principals.attach(listener)
        yield h, principals


async def ask(h: Harness, request: Any, principals: QueuedPrincipals | None = None, who: KafkaPrincipal = ADMIN) -> Any:
    port = h.broker.port(PLAINTEXT)
    conn = await (principals.connect(port, who) if principals else KafkaConnection.open("127.0.0.1", port))
    try:
        return await conn.request(request, 10)
    finally:
        conn.close()


def batched(key_type: int, *keys: str) -> fc.FindCoordinatorRequest:
    return fc.FindCoordinatorRequest(version=4, key_type=key_type, coordinator_keys=keys)


async def test_describe_on_the_group_or_transactional_id_is_needed(secured: Any) -> None:
    h, principals = secured
    port = h.broker.port(PLAINTEXT)
    answer = await ask(h, batched(0, "alice-1", "bob-1"), principals, ALICE)
    assert [(c.key, c.error_code, c.node_id, c.port) for c in answer.coordinators] == [
        ("alice-1", E.NONE, 1, port), ("bob-1", E.GROUP_AUTHORIZATION_FAILED, -1, -1),
    ]  # fmt: skip
    answer = await ask(h, batched(1, "bob-txn", "alice-1"), principals, BOB)
    assert [(c.key, c.error_code) for c in answer.coordinators] == [
        ("bob-txn", E.COORDINATOR_NOT_AVAILABLE),  # (allowed; no __transaction_state, no controller)
        ("alice-1", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ]
    old = await ask(h, fc.FindCoordinatorRequest(version=1, key="alice-x"), principals, BOB)
    assert (old.error_code, old.error_message, old.node_id, old.host, old.port) == (
        E.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.", -1, "", -1,
    )  # fmt: skip
    mine = await ask(h, fc.FindCoordinatorRequest(version=3, key="alice-x"), principals, ALICE)
    assert (mine.error_code, mine.error_message, mine.node_id, mine.port) == (E.NONE, "NONE", 1, port)


async def test_no_live_leader_on_the_listener_is_coordinator_not_available() -> None:
    async with coordinator_broker() as h:
        key = next(k for k in (f"g{i}" for i in range(100)) if h.runtime.partition_for(k) == 1)
        other = next(k for k in (f"g{i}" for i in range(100)) if h.runtime.partition_for(k) == 0)
        # partition 1 led by broker 2, alive only on another listener; partition 0 leaderless
        brokers = [
            live_broker(1, {PLAINTEXT: ("127.0.0.1", h.broker.port(PLAINTEXT))}),
            live_broker(2, {"EXTERNAL": ("127.0.0.1", 1)}),
        ]
        parts = [partition(0, -1, (1, 2), isr=(1,), leader_epoch=2), partition(1, 2, (1, 2), leader_epoch=2)]
        assert (await h.control(update_metadata(brokers, {TOPIC: parts}))).error_code == 0
        answer = await ask(h, batched(0, key, other))
        assert [(c.key, c.error_code, c.node_id) for c in answer.coordinators] == [
            (key, E.COORDINATOR_NOT_AVAILABLE, -1), (other, E.COORDINATOR_NOT_AVAILABLE, -1),
        ]  # fmt: skip
        assert h.runtime.num_partitions == PARTITIONS


async def test_v0_asks_for_a_group_and_an_empty_batch_is_answered_empty() -> None:
    async with coordinator_broker() as h:
        v0 = await ask(h, fc.FindCoordinatorRequest(version=0, key="g"))
        assert (v0.error_code, v0.node_id, v0.port) == (E.NONE, 1, h.broker.port(PLAINTEXT))
        assert list((await ask(h, batched(0))).coordinators) == []
