"""Topic configs end to end in one process: AlterConfigs / IncrementalAlterConfigs /
CreateTopics configs sent to a real broker, forwarded to a real controller, durable in its
store, pushed to every broker's cache and described by DescribeConfigs (raw requests)."""

from __future__ import annotations

import pytest

from kmeta.controller.store.sqlite_store import ControllerStore
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import alter_configs as ac
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import delete_topics as dt
from kmeta.protocol.messages import describe_configs as dcf
from kmeta.protocol.messages import incremental_alter_configs as iac
from tests.controller.helpers import InProcessCluster, wait_until

E = ErrorCode
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture
def cluster_brokers() -> int:
    return 2


async def _request(c: InProcessCluster, request, broker: int = 1):
    conn = await c.connect(broker)
    try:
        return await conn.request(request, 10.0)
    finally:
        conn.close()


async def _create(c: InProcessCluster, name: str, configs: dict[str, str | None] | None = None, validate_only=False):
    topic = ct.CreatableTopic(
        name=name, num_partitions=2, replication_factor=2,
        configs=tuple(ct.CreatableTopicConfig(k, v) for k, v in (configs or {}).items()),
    )  # fmt: skip
    resp = await _request(c, ct.CreateTopicsRequest(version=7, topics=(topic,), timeout_ms=5000, validate_only=validate_only))
    return resp.topics[0]


async def _incremental(c: InProcessCluster, *resources, validate_only=False, version=1):
    req = iac.IncrementalAlterConfigsRequest(
        version=version,
        resources=tuple(
            iac.AlterConfigsResource(kind, name, tuple(iac.AlterableConfig(*op) for op in ops))
            for kind, name, ops in resources
        ),
        validate_only=validate_only,
    )
    return [(r.resource_name, r.error_code, r.error_message) for r in (await _request(c, req)).responses]


async def _legacy(c: InProcessCluster, name: str, configs: dict[str, str | None], version=2):
    req = ac.AlterConfigsRequest(
        version=version,
        resources=(ac.AlterConfigsResource(TOPIC, name, tuple(ac.AlterableConfig(k, v) for k, v in configs.items())),),
    )
    (r,) = (await _request(c, req)).responses
    return r.error_code, r.error_message


def overrides(c: InProcessCluster, name: str) -> list[dict[str, str]]:
    """Every broker's cached overrides of ``name``."""
    return [dict(b.cache.snapshot.topic_configs.get(name, {})) for b in c.brokers.values()]


async def test_create_with_configs_then_incremental_operations(cluster):
    created = await _create(cluster, "t", {"retention.ms": " 60000", "cleanup.policy": "compact"})
    assert created.error_code == 0
    listed = {c.name: (c.value, c.config_source, c.read_only, c.is_sensitive) for c in created.configs}
    assert len(listed) == 36  # every topic config, as Kafka's CreateTopics v5+ answer
    assert listed["retention.ms"] == ("60000", 1, False, False)
    assert listed["segment.bytes"] == ("1073741824", 5, False, False)
    assert overrides(cluster, "t") == [{"retention.ms": "60000", "cleanup.policy": "compact"}] * 2
    assert cluster.controller.controller.state.topics["t"].configs == {"retention.ms": "60000", "cleanup.policy": "compact"}

    results = await _incremental(cluster, (TOPIC, "t", [
        ("cleanup.policy", APPEND, "delete"), ("retention.ms", DELETE, None), ("segment.ms", SET, "1000"),
    ]))  # fmt: skip
    assert results == [("t", 0, None)]
    assert overrides(cluster, "t") == [{"cleanup.policy": "compact,delete", "segment.ms": "1000"}] * 2
    assert await _incremental(cluster, (TOPIC, "t", [("cleanup.policy", SUBTRACT, "compact")])) == [("t", 0, None)]
    assert overrides(cluster, "t")[1]["cleanup.policy"] == "delete"

    # validate_only: answered, nothing changes
    assert await _incremental(cluster, (TOPIC, "t", [("segment.ms", SET, "5")]), validate_only=True) == [("t", 0, None)]
    assert overrides(cluster, "t")[0]["segment.ms"] == "1000"


async def test_legacy_alter_configs_replaces_the_whole_set(cluster):
    await _create(cluster, "t", {"retention.ms": "60000", "segment.ms": "1000"})
    assert await _legacy(cluster, "t", {"min.insync.replicas": "2"}, version=0) == (0, None)
    assert overrides(cluster, "t") == [{"min.insync.replicas": "2"}] * 2
    assert await _legacy(cluster, "t", {}) == (0, None)
    assert overrides(cluster, "t") == [{}] * 2
    code, message = await _legacy(cluster, "t", {"retention.ms": None})
    assert (code, message) == (E.INVALID_REQUEST, "Null value not supported for : retention.ms")


async def test_kafkas_errors(cluster):
    await _create(cluster, "t")
    results = await _incremental(
        cluster,
        (TOPIC, "t", [("retention.ms", SET, "soon")]),
        (TOPIC, "ghost", [("retention.ms", SET, "1")]),
        (TOPIC, "", [("retention.ms", SET, "1")]),
        (BROKER, "1", [("log.retention.ms", SET, "1")]),
        (BROKER_LOGGER, "1", [("kafka", SET, "DEBUG")]),
    )
    assert results == [
        ("t", E.INVALID_CONFIG, "Invalid config value for resource ConfigResource(type=TOPIC, name='t'): "
                                "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
        ("ghost", E.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'ghost' does not exist."),
        ("", E.INVALID_REQUEST, "Default topic resources are not allowed."),
        ("1", E.INVALID_REQUEST, "kmeta brokers have no dynamic configs to alter."),
        ("1", E.INVALID_REQUEST, "Unknown resource type 8"),
    ]  # fmt: skip
    results = await _incremental(
        cluster,
        (TOPIC, "t", [("unknown.config", SET, "1")]),
        (TOPIC, "t", [("retention.ms", SET, "1")]),
    )
    assert [r[1] for r in results] == [E.INVALID_REQUEST, E.INVALID_REQUEST]  # named twice
    assert results[0][2] == "Each resource must appear at most once."
    (result,) = await _incremental(cluster, (TOPIC, "t", [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)]))
    assert result[1:] == (E.INVALID_REQUEST, "Error due to duplicate config keys")
    (result,) = await _incremental(cluster, (TOPIC, "t", [("retention.ms", SET, None)]))
    assert result[1:] == (E.INVALID_REQUEST, "Null value not supported for : retention.ms")
    (result,) = await _incremental(cluster, (TOPIC, "t", [("retention.ms", 9, "1")]))
    assert result[1:] == (E.INVALID_REQUEST, "Unknown operations type 9")
    (result,) = await _incremental(cluster, (TOPIC, "t", [("retention.ms", APPEND, "1")]))
    assert result[1] == E.INVALID_CONFIG
    assert result[2].endswith("Config value append is not allowed for config key: retention.ms")
    (result,) = await _incremental(cluster, (TOPIC, "t", [("no.such", SET, "1")]))
    assert result[1:] == (E.INVALID_CONFIG, "Invalid config value for resource ConfigResource(type=TOPIC, name='t'): "
                                             "Unknown topic config name: no.such")  # fmt: skip
    assert overrides(cluster, "t") == [{}] * 2

    bad = await _create(cluster, "u", {"max.message.bytes": "-1"})
    assert (bad.error_code, bad.error_message) == (
        E.INVALID_CONFIG, "Invalid value -1 for configuration max.message.bytes: Value must be at least 0"
    )
    bad = await _create(cluster, "u", {"retention.ms": None})
    assert (bad.error_code, bad.error_message) == (E.INVALID_CONFIG, "Null value not supported for topic configs: retention.ms")
    assert "u" not in cluster.controller.controller.state.topics


async def test_configs_are_durable_and_go_with_the_topic(cluster, tmp_path):
    await _create(cluster, "t", {"retention.ms": "60000"})
    await _create(cluster, "gone", {"segment.ms": "1000"})
    deleted = await _request(cluster, dt.DeleteTopicsRequest(version=4, topic_names=("gone",), timeout_ms=5000))
    assert deleted.responses[0].error_code == 0
    await wait_until(lambda: all("gone" not in b.cache.snapshot.topic_configs for b in cluster.brokers.values()), 5)
    store = ControllerStore(cluster.controller.controller.store.path.parent)
    try:
        loaded = store.load()
    finally:
        store.close()
    assert loaded.topics["t"].configs == {"retention.ms": "60000"}
    assert "gone" not in loaded.topics
    # a topic of the same name starts without the old overrides
    await _create(cluster, "gone")
    assert overrides(cluster, "gone") == [{}] * 2


async def test_describe_configs_on_every_broker(cluster):
    await _create(cluster, "t", {"retention.ms": "60000"})
    for broker in (1, 2):
        req = dcf.DescribeConfigsRequest(
            version=4,
            resources=(dcf.DescribeConfigsResource(TOPIC, "t", ("retention.ms", "segment.bytes")),),
            include_synonyms=True,
        )
        (result,) = (await _request(cluster, req, broker)).results
        got = {c.name: (c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms]) for c in result.configs}
        assert got == {
            "retention.ms": ("60000", 1, [("retention.ms", "60000", 1)]),
            "segment.bytes": ("1073741824", 5, [("log.segment.bytes", "1073741824", 5)]),
        }
