"""CreateTopics / DeleteTopics / CreatePartitions validation, end to end in one process.

Requests go to a real broker's client listener, which forwards them to a real controller;
the answers and the brokers' caches are checked against Kafka's rules and error codes.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_partitions as cp
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import delete_topics as dt
from tests.controller.helpers import (
    InProcessCluster,
    RecordingBroker,
    link_of,
    start_cluster,
    start_controller,
    wait_until,
)

E = ErrorCode


def topic(name, n=-1, rf=-1, assignments=None):
    assigned = tuple(
        ct.CreatableReplicaAssignment(partition_index=p, broker_ids=tuple(b))
        for p, b in (assignments or {}).items()
    )
    return ct.CreatableTopic(
        name=name, num_partitions=n, replication_factor=rf, assignments=assigned
    )


async def create(c: InProcessCluster, *topics, validate_only=False, version=7, timeout_ms=5000):
    conn = await c.connect(2)
    try:
        response = await conn.request(
            ct.CreateTopicsRequest(
                version=version,
                topics=tuple(topics),
                timeout_ms=timeout_ms,
                validate_only=validate_only,
            ),
            10.0,
        )
    finally:
        conn.close()
    return {r.name: r for r in response.topics}


def cached(c: InProcessCluster, name: str) -> list[dict]:
    """Every broker's cached partitions of ``name`` (index -> (leader, replicas))."""
    out = []
    for b in c.brokers.values():
        parts = b.cache.snapshot.partition_states.get(name) or {}
        out.append({p: (st.leader, tuple(st.replicas)) for p, st in parts.items()})
    return out


async def test_explicit_assignments_are_applied_or_refused_as_kafka_does(cluster):
    ok = await create(cluster, topic("manual", assignments={0: [3, 1], 1: [1, 2], 2: [2, 3]}))
    assert ok["manual"].error_code == 0
    assert (ok["manual"].num_partitions, ok["manual"].replication_factor) == (3, 2)
    expected = {0: (3, (3, 1)), 1: (1, (1, 2)), 2: (2, (2, 3))}
    assert cached(cluster, "manual") == [expected] * 3  # barrier: every broker has it now

    bad = ErrorCode.INVALID_REPLICA_ASSIGNMENT
    cases = {
        "gap": ({0: [1], 2: [2]}, "partitions should be a consecutive 0-based integer sequence"),
        "rf": (
            {0: [1, 2], 1: [3]},
            "The manual partition assignment includes a partition with 1 replica(s), but this "
            "is not consistent with previous partitions, which have 2 replica(s).",
        ),
        "dup": (
            {0: [2, 1, 2]},
            "The manual partition assignment includes the broker 2 more than once.",
        ),
        "unknown": (
            {0: [1, 7]},
            "The manual partition assignment includes broker 7, but no such broker is registered.",
        ),
        "empty": ({0: []}, "The manual partition assignment includes an empty replica list."),
    }
    results = await create(cluster, *(topic(n, assignments=a) for n, (a, _) in cases.items()))
    for name, (_, message) in cases.items():
        assert (results[name].error_code, results[name].error_message) == (bad, message), name
        assert results[name].num_partitions == -1
    # assignments together with a partition count is a malformed request
    mixed = await create(cluster, topic("mixed", n=2, assignments={0: [1]}))
    assert mixed["mixed"].error_code == E.INVALID_REQUEST
    for name in [*cases, "mixed"]:
        assert cached(cluster, name) == [{}] * 3
        assert name not in cluster.controller.controller.state.topics


async def test_validation_errors_and_validate_only(cluster):
    results = await create(
        cluster,
        topic("exists", 1, 1),
        topic("bad/name", 1, 1),
        topic("..", 1, 1),
        topic("x" * 250, 1, 1),
        topic("zero-partitions", 0, 1),
        topic("negative-partitions", -2, 1),
        topic("rf-too-big", 1, 4),
        topic("rf-zero", 1, 0),
    )
    assert results["exists"].error_code == 0
    codes = {name: r.error_code for name, r in results.items()}
    assert codes == {
        "exists": 0,
        "bad/name": E.INVALID_TOPIC_EXCEPTION,
        "..": E.INVALID_TOPIC_EXCEPTION,
        "x" * 250: E.INVALID_TOPIC_EXCEPTION,
        "zero-partitions": E.INVALID_PARTITIONS,
        "negative-partitions": E.INVALID_PARTITIONS,
        "rf-too-big": E.INVALID_REPLICATION_FACTOR,
        "rf-zero": E.INVALID_REPLICATION_FACTOR,
    }
    assert results["rf-too-big"].error_message == (
        "Replication factor: 4 larger than available brokers: 3."
    )
    again = await create(cluster, topic("exists", 1, 1), topic("ex_ists", 1, 1))
    assert again["exists"].error_code == E.TOPIC_ALREADY_EXISTS
    assert again["exists"].error_message == "Topic 'exists' already exists."
    assert again["ex_ists"].error_code == 0  # no '.'/'_' collision with "exists"

    # validate_only: answered as if created (counts, RF, no id), nothing created anywhere
    dry = await create(cluster, topic("dry", 6, 3), topic("exists", 1, 1), validate_only=True)
    assert dry["dry"].error_code == 0
    assert (dry["dry"].num_partitions, dry["dry"].replication_factor) == (6, 3)
    assert dry["dry"].topic_id == uuid.UUID(int=0)
    assert dry["exists"].error_code == E.TOPIC_ALREADY_EXISTS
    assert "dry" not in cluster.controller.controller.state.topics
    assert cached(cluster, "dry") == [{}] * 3
    # and it can then really be created
    assert (await create(cluster, topic("dry", 6, 3)))["dry"].error_code == 0
    assert all(len(view) == 6 for view in cached(cluster, "dry"))


async def test_create_partitions_rules_and_explicit_assignments(cluster):
    assert (await create(cluster, topic("grow", 2, 2)))["grow"].error_code == 0

    async def grow(*topics, validate_only=False):
        conn = await cluster.connect(1)
        try:
            response = await conn.request(
                cp.CreatePartitionsRequest(
                    version=3, topics=tuple(topics), timeout_ms=5000, validate_only=validate_only
                ),
                10.0,
            )
        finally:
            conn.close()
        return [(r.error_code, r.error_message) for r in response.results]

    def to(count, assignments=None):
        return cp.CreatePartitionsTopic(
            name="grow",
            count=count,
            assignments=None
            if assignments is None
            else tuple(cp.CreatePartitionsAssignment(broker_ids=tuple(a)) for a in assignments),
        )

    bad = E.INVALID_REPLICA_ASSIGNMENT
    assert await grow(to(1)) == [
        (
            E.INVALID_PARTITIONS,
            "Topic currently has 2 partitions, which is higher than the requested 1.",
        )
    ]
    assert (await grow(to(2)))[0][0] == E.INVALID_PARTITIONS
    assert await grow(to(4, [[1, 2]])) == [
        (bad, "Increasing the number of partitions by 2 but 1 assignments provided.")
    ]
    assert await grow(to(3, [[1]])) == [
        (
            bad,
            "Inconsistent replication factor between partitions, partition 0 has 2 while "
            "partitions [2] have replication factors [1], respectively.",
        )
    ]
    assert await grow(to(3, [[3, 3]])) == [
        (bad, "Duplicate brokers not allowed in replica assignment: 3, 3 for partition id 2.")
    ]
    assert await grow(to(3, [[3, 9]])) == [(bad, "Unknown broker(s) in replica assignment: 9.")]
    unknown = cp.CreatePartitionsTopic(name="nope", count=3)
    assert (await grow(unknown))[0][0] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert await grow(to(4, [[3, 1], [1, 3]]), validate_only=True) == [(0, None)]
    assert all(len(view) == 2 for view in cached(cluster, "grow"))

    assert await grow(to(4, [[3, 1], [1, 3]])) == [(0, None)]
    for view in cached(cluster, "grow"):  # barrier on: all brokers have them on return
        assert view[2] == (3, (3, 1))
        assert view[3] == (1, (1, 3))
    assert await grow(to(6)) == [(0, None)]
    assert all(len(view) == 6 for view in cached(cluster, "grow"))
    assert all(len(r) == 2 for _, r in cached(cluster, "grow")[0].values())


async def test_delete_by_name_and_by_id_and_unknown(cluster):
    created = await create(cluster, topic("by-name", 2, 2), topic("by-id", 2, 2))
    topic_id = created["by-id"].topic_id
    assert topic_id != uuid.UUID(int=0)
    conn = await cluster.connect(3)
    try:
        old = await conn.request(
            dt.DeleteTopicsRequest(version=5, topic_names=("by-name", "ghost"), timeout_ms=5000)
        )
        assert [(r.name, r.error_code) for r in old.responses] == [
            ("by-name", 0),
            ("ghost", E.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        v6 = await conn.request(
            dt.DeleteTopicsRequest(
                version=6,
                topics=(
                    dt.DeleteTopicState(name=None, topic_id=topic_id),
                    dt.DeleteTopicState(name=None, topic_id=uuid.uuid4()),
                ),
                timeout_ms=5000,
            )
        )
    finally:
        conn.close()
    assert next((r.name, r.topic_id, r.error_code) for r in v6.responses) == ("by-id", topic_id, 0)
    assert v6.responses[1].error_code == E.UNKNOWN_TOPIC_ID
    for name in ("by-name", "by-id"):
        assert cached(cluster, name) == [{}] * 3
        assert name not in cluster.controller.controller.state.topics


async def test_barrier_off_answers_once_the_forwarding_broker_has_it(tmp_path):
    """A broker that never acknowledges UpdateMetadata holds the barrier, not the non-barrier."""
    for barrier in (False, True):
        c = await start_cluster(tmp_path / str(barrier), brokers=2, propagation_barrier=barrier)
        slow = RecordingBroker(9)
        await slow.start()
        try:
            slow.hold = True
            await slow.register(c.controller.port)
            await wait_until(
                lambda c=c: all(9 in b.cache.snapshot.alive_brokers for b in c.brokers.values()),
                5,
            )
            started = asyncio.get_running_loop().time()
            results = await create(c, topic("t", 4, 2), timeout_ms=800)
            elapsed = asyncio.get_running_loop().time() - started
            forwarder = c.brokers[2].cache.snapshot.partition_states.get("t")
            if barrier:  # Kafka semantics for a change not propagated in time: it still happened
                assert results["t"].error_code == E.REQUEST_TIMED_OUT
                assert elapsed >= 0.8
            else:
                assert results["t"].error_code == 0
                assert elapsed < 0.8
                assert forwarder is not None
                assert len(forwarder) == 4
            assert "t" in c.controller.controller.state.topics
        finally:
            # (answered, or each broker's controlled shutdown would wait its 5 s for them)
            slow.release()
            await c.stop()
            await slow.stop()


async def test_controller_serves_api_versions(tmp_path):
    from kmeta.net.connection import KafkaConnection
    from kmeta.protocol.api_keys import ApiKey
    from kmeta.protocol.messages import api_versions as av

    daemon = await start_controller(tmp_path)
    try:
        conn = await KafkaConnection.open("127.0.0.1", daemon.port)
        try:
            response = await conn.request(
                av.ApiVersionsRequest(
                    version=3, client_software_name="t", client_software_version="1"
                )
            )
            bad = await conn.request(
                av.ApiVersionsRequest(
                    version=3, client_software_name="-bad", client_software_version="1"
                )
            )
        finally:
            conn.close()
        served = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert response.error_code == 0
        assert served == {
            ApiKey.CONTROLLED_SHUTDOWN: (0, 3),
            ApiKey.API_VERSIONS: (0, 4),
            ApiKey.CREATE_TOPICS: (0, 7),
            ApiKey.DELETE_TOPICS: (0, 6),
            ApiKey.CREATE_PARTITIONS: (0, 3),
            ApiKey.BROKER_REGISTRATION: (0, 4),
            ApiKey.BROKER_HEARTBEAT: (0, 1),
            ApiKey.ELECT_LEADERS: (0, 2),
            ApiKey.ALTER_PARTITION: (0, 3),
            ApiKey.ALLOCATE_PRODUCER_IDS: (0, 0),
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
            ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
            ApiKey.ALTER_CONFIGS: (0, 2),
            ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
            ApiKey.CREATE_ACLS: (0, 3),
            ApiKey.DELETE_ACLS: (0, 3),
            ApiKey.SASL_HANDSHAKE: (0, 1),
            ApiKey.SASL_AUTHENTICATE: (0, 2),
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
            ApiKey.ENVELOPE: (0, 0),  # (brokers forward their clients' requests in it)
        }
        assert bad.error_code == E.INVALID_REQUEST
        assert len(bad.api_keys) == len(served)
        # a version above 4: a v0 answer with UNSUPPORTED_VERSION and ApiVersions' own range
        reader, writer = await asyncio.open_connection("127.0.0.1", daemon.port)
        try:
            body = (18).to_bytes(2, "big") + (9).to_bytes(2, "big") + (7).to_bytes(4, "big")
            body += (1).to_bytes(2, "big") + b"x" + b"\x00"  # client id "x", empty tagged body
            writer.write(len(body).to_bytes(4, "big") + body)
            size = int.from_bytes(await reader.readexactly(4), "big")
            frame = await reader.readexactly(size)
        finally:
            writer.close()
        assert int.from_bytes(frame[:4], "big") == 7
        answer = av.RESPONSE.decode(frame, 0, 4)
        assert answer.error_code == E.UNSUPPORTED_VERSION
        assert [(k.api_key, k.min_version, k.max_version) for k in answer.api_keys] == [
            (ApiKey.API_VERSIONS, 0, 4)
        ]
    finally:
        await daemon.stop()


async def test_broker_link_negotiates_versions_with_the_controller(cluster):
    from kmeta.protocol.api_keys import ApiKey
    from kmeta.server.lifecycle.controller_registration import pick_version

    link = link_of(cluster.brokers[1])
    assert link.heartbeat_interval_s == 0.1  # --heartbeat-interval-ms 100 in the helper
    assert link.controller_versions[ApiKey.BROKER_REGISTRATION] == range(5)
    assert pick_version({ApiKey.BROKER_HEARTBEAT: range(1)}, ApiKey.BROKER_HEARTBEAT, 1) == 0
    with pytest.raises(Exception, match="does not serve"):
        pick_version({}, ApiKey.BROKER_HEARTBEAT, 1)
    # a forwarded version the controller does not serve is refused at the broker
    conn = await cluster.connect(1)
    try:
        first = await conn.request(ct.CreateTopicsRequest(version=7, topics=(topic("v7", 1, 1),)))
        assert first.topics[0].error_code == 0
        link.forwarding.admin_versions[ApiKey.CREATE_TOPICS] = range(5)  # as an older controller
        refused = await conn.request(
            ct.CreateTopicsRequest(version=7, topics=(topic("v7b", 1, 1),))
        )
        older = await conn.request(ct.CreateTopicsRequest(version=4, topics=(topic("v4", 1, 1),)))
    finally:
        conn.close()
    assert refused.topics[0].error_code == E.UNSUPPORTED_VERSION
    assert older.topics[0].error_code == 0
    assert "v7b" not in cluster.controller.controller.state.topics


def test_heartbeat_interval_defaults_to_kafkas_and_is_validated():
    from kmeta.server.config import BrokerConfig, parse_listeners

    listeners = parse_listeners("PLAINTEXT://127.0.0.1:0")
    assert BrokerConfig(broker_id=1, listeners=listeners).heartbeat_interval_ms == 2000
    with pytest.raises(ValueError, match="heartbeat_interval_ms"):
        BrokerConfig(broker_id=1, listeners=listeners, heartbeat_interval_ms=0)
