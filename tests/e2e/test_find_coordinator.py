"""FindCoordinator on a real cluster (controller and three broker processes): the internal
topics are created by the first ask with the configured partitions, the coordinator is the
leader of ``abs(key.hashCode()) % partitions``, batched v4+ answers each key, and when that
leader is killed -9 the answer follows the new leader. kafka-python's admin client finds
coordinators the way it does against Kafka."""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Sequence
from typing import Any

import pytest

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import describe_configs as dc
from kmeta.protocol.messages import find_coordinator as fc
from kmeta.protocol.messages import metadata as md
from kmeta.server.coordinator.runtime import partition_for
from kmeta.testing import Cluster

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient

pytestmark = pytest.mark.e2e

OFFSETS, TXNS = 5, 3


async def _ask(cluster: Cluster, broker: int, request: Any) -> Any:
    conn = await KafkaConnection.open(*cluster.address(broker))
    try:
        return await conn.request(request, 10)
    finally:
        conn.close()


def ask(cluster: Cluster, broker: int, request: Any) -> Any:
    return asyncio.run(_ask(cluster, broker, request))


def find(cluster: Cluster, broker: int, keys: Sequence[str], key_type: int = 0, timeout_s: float = 30.0) -> dict[str, Any]:
    """Batched FindCoordinator (v4) until every key has its coordinator."""
    deadline = time.monotonic() + timeout_s
    while True:
        resp = ask(cluster, broker, fc.FindCoordinatorRequest(version=4, key_type=key_type, coordinator_keys=tuple(keys)))
        answers = {c.key: c for c in resp.coordinators}
        assert list(answers) == list(keys)
        pending = {k: c.error_code for k, c in answers.items() if c.error_code != ErrorCode.NONE}
        if not pending:
            return answers
        assert set(pending.values()) == {ErrorCode.COORDINATOR_NOT_AVAILABLE}, pending
        assert time.monotonic() < deadline, f"no coordinator: {pending}"
        time.sleep(0.2)


def test_find_coordinator_creates_the_internal_topics_and_names_the_partition_leader() -> None:
    with Cluster(3, offsets_topic_num_partitions=OFFSETS, transaction_state_log_num_partitions=TXNS) as cluster:
        first = ask(cluster, 1, fc.FindCoordinatorRequest(version=3, key="g0"))
        assert first.error_code in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NONE)
        groups = [f"group-{i}" for i in range(12)]
        answers = find(cluster, 2, groups)
        view = cluster.metadata(3)
        assert len(view.topics["__consumer_offsets"]) == OFFSETS
        assert all(len(p.replicas) == 3 for p in view.topics["__consumer_offsets"].values())
        for key, answer in answers.items():
            leader = view.leader("__consumer_offsets", partition_for(key, OFFSETS))
            host, port, _ = view.brokers[leader]
            assert (answer.node_id, answer.host, answer.port) == (leader, host, port)
        # every version answers the same node; v0 has no key type (a group)
        for version in range(4):
            one = ask(cluster, 1, fc.FindCoordinatorRequest(version=version, key="group-3"))
            assert one.error_code == 0
            assert one.node_id == answers["group-3"].node_id
            if version >= 1:
                assert one.error_message == "NONE"
        txn = find(cluster, 1, ["txn-a", "txn-b"], key_type=1)
        view = cluster.metadata(1)
        assert len(view.topics["__transaction_state"]) == TXNS
        assert txn["txn-a"].node_id == view.leader("__transaction_state", partition_for("txn-a", TXNS))
        meta = ask(cluster, 1, md.MetadataRequest(version=12, topics=None))
        internal = {t.name: t.is_internal for t in meta.topics}
        assert internal["__consumer_offsets"]
        assert internal["__transaction_state"]
        configs = ask(cluster, 1, dc.DescribeConfigsRequest(version=4, resources=(
            dc.DescribeConfigsResource(2, "__transaction_state", ("cleanup.policy", "min.insync.replicas")),
            dc.DescribeConfigsResource(2, "__consumer_offsets", ("cleanup.policy",)),
        )))  # fmt: skip
        values = {(r.resource_name, c.name): c.value for r in configs.results for c in r.configs}
        assert values == {
            ("__transaction_state", "cleanup.policy"): "compact",
            ("__transaction_state", "min.insync.replicas"): "2",
            ("__consumer_offsets", "cleanup.policy"): "compact",
        }
        # a bad key type is INVALID_REQUEST, for each key (v4) or the request (v1-3)
        bad = ask(cluster, 1, fc.FindCoordinatorRequest(version=4, key_type=2, coordinator_keys=("x", "y")))
        assert [(c.key, c.error_code, c.node_id) for c in bad.coordinators] == [("x", 42, -1), ("y", 42, -1)]
        assert ask(cluster, 1, fc.FindCoordinatorRequest(version=2, key="x", key_type=7)).error_code == 42
        # kafka-python's admin client, batched as it asks Kafka 3.x
        admin = KafkaAdminClient(**cluster.client_config(kafka_python=True))  # type: ignore[arg-type]
        try:
            found = admin._manager.run(admin._find_coordinator_ids, groups[:4])
        finally:
            admin.close()
        assert found == {g: answers[g].node_id for g in groups[:4]}


def test_the_coordinator_follows_the_leader_after_a_kill_9() -> None:
    with Cluster(3, offsets_topic_num_partitions=OFFSETS, session_timeout_ms=3_000) as cluster:
        key = "moving-group"
        index = partition_for(key, OFFSETS)
        before = find(cluster, 1, [key])[key].node_id
        assert before == cluster.metadata(1).leader("__consumer_offsets", index)
        cluster.kill_broker(before)
        asker = next(b for b in cluster.broker_ids if b != before)
        deadline = time.monotonic() + 30
        while True:
            answer = find(cluster, asker, [key])[key]
            if answer.node_id != before:
                break
            assert time.monotonic() < deadline, "the coordinator did not move"
            time.sleep(0.2)
        assert answer.node_id == cluster.metadata(asker).leader("__consumer_offsets", index)
