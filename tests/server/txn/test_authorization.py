"""The transactional APIs' authorization as Kafka checks it, over loopback with --authorizer
acl (principals set per connection as an authenticator sets them). A request that passes its
checks reaches the coordinator, which on this broker coordinates nothing: the answer then is
the coordinator's, not an authorization error."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from kmeta.net.principal import KafkaPrincipal
from kmeta.net.security.acl import AclBinding, AclOperation, ResourceType
from kmeta.net.security.authorizer import AclSet, AuthorizerConfig, parse_super_users
from kmeta.protocol.errors import ErrorCode as E
from kmeta.protocol.messages import add_partitions_to_txn as ap
from kmeta.protocol.messages import describe_transactions as dt
from kmeta.protocol.messages import end_txn as et
from kmeta.protocol.messages import list_transactions as lt
from kmeta.server.broker import Broker
from tests.server.helpers import PLAINTEXT
from tests.server.log_broker import TOPIC, log_broker
from tests.server.principals import QueuedPrincipals, user

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ADMIN, ALICE, BOB, CAROL = user("admin"), user("alice"), user("bob"), user("carol")
LITERAL, ALLOW = 3, 3
TXN = ResourceType.TRANSACTIONAL_ID


def acl(who: KafkaPrincipal, op: int, rtype: int, name: str) -> AclBinding:
    return AclBinding(rtype, name, LITERAL, str(who), "*", op, ALLOW)


@pytest.fixture
async def secured() -> AsyncIterator[tuple[Broker, QueuedPrincipals]]:
    authz = AuthorizerConfig(True, parse_super_users("User:ANONYMOUS;User:admin"))
    async with log_broker(authorizer=authz) as b:
        assert b.state.authorizer is not None
        b.state.authorizer.replace(AclSet([
            acl(ALICE, AclOperation.WRITE, TXN, "t-alice"),  # (WRITE implies DESCRIBE)
            acl(ALICE, AclOperation.WRITE, ResourceType.TOPIC, TOPIC),
            acl(BOB, AclOperation.WRITE, TXN, "t-bob"),
            acl(CAROL, AclOperation.DESCRIBE, TXN, "t-carol"),
        ]))  # fmt: skip
        principals = QueuedPrincipals(default=ADMIN)
        for listener in b.listeners:
            if not listener.info.is_control:
                principals.attach(listener)
        yield b, principals


async def call(secured: tuple[Broker, QueuedPrincipals], who: KafkaPrincipal, request: Any) -> Any:
    b, principals = secured
    conn = await principals.connect(b.port(PLAINTEXT), who)
    try:
        return await conn.request(request, 10)
    finally:
        conn.close()


async def test_end_txn_needs_write_on_the_transactional_id(secured: Any) -> None:
    for who, txn_id, error in (
        (ALICE, "t-alice", E.NOT_COORDINATOR), (ALICE, "t-bob", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        (CAROL, "t-carol", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ):  # fmt: skip
        answer = await call(secured, who, et.EndTxnRequest(version=3, transactional_id=txn_id, producer_id=1, committed=True))
        assert answer.error_code == error, (who, txn_id)


async def test_add_partitions_needs_write_on_the_id_and_on_each_topic(secured: Any) -> None:
    def request(txn_id: str, *topics: str) -> ap.AddPartitionsToTxnRequest:
        return ap.AddPartitionsToTxnRequest(
            version=3, v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=1,
            v3_and_below_topics=tuple(ap.AddPartitionsToTxnTopic(t, (0,)) for t in topics),
        )  # fmt: skip

    def errors(answer: Any) -> dict[str, int]:
        return {t.name: p.partition_error_code for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition}

    assert errors(await call(secured, ALICE, request("t-bob", TOPIC))) == {TOPIC: E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    # bob may write his id but not the topic: that one is refused, the others not attempted
    assert errors(await call(secured, BOB, request("t-bob", TOPIC, "nowhere"))) == {
        TOPIC: E.TOPIC_AUTHORIZATION_FAILED, "nowhere": E.TOPIC_AUTHORIZATION_FAILED,
    }  # fmt: skip
    assert errors(await call(secured, ADMIN, request("t-admin", TOPIC, "nowhere"))) == {
        TOPIC: E.OPERATION_NOT_ATTEMPTED, "nowhere": E.UNKNOWN_TOPIC_OR_PARTITION,
    }  # fmt: skip
    assert errors(await call(secured, ALICE, request("t-alice", TOPIC))) == {TOPIC: E.NOT_COORDINATOR}


async def test_add_partitions_v4_is_for_brokers_only(secured: Any) -> None:
    txn = ap.AddPartitionsToTxnTransaction("t-alice", 1, 0, True, (ap.AddPartitionsToTxnTopic(TOPIC, (0,)),))
    answer = await call(secured, ALICE, ap.AddPartitionsToTxnRequest(version=4, transactions=(txn,)))
    assert answer.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert answer.results_by_transaction == ()
    answer = await call(secured, ADMIN, ap.AddPartitionsToTxnRequest(version=5, transactions=(txn,)))
    assert answer.error_code == E.NONE
    [result] = answer.results_by_transaction
    assert [p.partition_error_code for t in result.topic_results for p in t.results_by_partition] == [E.NOT_COORDINATOR]


async def test_describe_and_list_transactions_need_describe(secured: Any) -> None:
    answer = await call(secured, CAROL, dt.DescribeTransactionsRequest(transactional_ids=("t-carol", "t-alice")))
    assert [(s.transactional_id, s.error_code) for s in answer.transaction_states] == [
        ("t-carol", E.NOT_COORDINATOR), ("t-alice", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ]  # fmt: skip
    answer = await call(secured, CAROL, lt.ListTransactionsRequest(version=1, state_filters=("Ongoing", "Nope")))
    assert (answer.error_code, answer.unknown_state_filters, answer.transaction_states) == (E.NONE, ("Nope",), ())
