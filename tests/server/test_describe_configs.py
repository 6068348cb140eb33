"""DescribeConfigs (32) v0-4 from the broker's cache and config, and how UpdateMetadata's
kmeta_topic_configs tagged field sets the cached overrides (in-memory connection)."""

from __future__ import annotations

import pytest

from kmeta.metadata.log_config import TOPIC_CONFIGS
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import describe_configs as dcf
from kmeta.protocol.messages import update_metadata as um
from tests.server.helpers import (
    CONTROL,
    PLAINTEXT,
    ConnectionPair,
    broker_state,
    live_broker,
    partition,
    topic_id,
)

TOPIC, BROKER = 2, 4


def _push(ctl: ConnectionPair, topics: dict[str, dict[str, str] | None], version: int = 8, full: bool = False) -> None:
    brokers = [live_broker(1, {PLAINTEXT: ("h1", 9001), CONTROL: ("h1", 9101)})]
    states = tuple(
        um.UpdateMetadataTopicState(
            name, topic_id(name), (partition(0, 1, (1,)),),
            None if configs is None else tuple(um.KmetaTopicConfig(k, v) for k, v in configs.items()),
        )
        for name, configs in topics.items()
    )  # fmt: skip
    req = um.UpdateMetadataRequest(
        version=version, controller_id=1, controller_epoch=1, broker_epoch=-1, topic_states=states,
        live_brokers=tuple(brokers), type=2 if full else 1,
    )  # fmt: skip
    assert ctl.request(req).error_code == 0


def _pair() -> tuple[ConnectionPair, ConnectionPair]:
    state = broker_state()
    return ConnectionPair(state, CONTROL, is_control=True), ConnectionPair(state)


def _describe(client: ConnectionPair, *resources: tuple[int, str, tuple[str, ...] | None], version: int = 4, synonyms: bool = True):
    req = dcf.DescribeConfigsRequest(
        version=version,
        resources=tuple(dcf.DescribeConfigsResource(k, n, keys) for k, n, keys in resources),
        include_synonyms=synonyms,
    )
    return client.request(req).results


async def test_tagged_field_sets_replaces_keeps_and_drops_overrides() -> None:
    ctl, _ = _pair()
    _push(ctl, {"a": {"retention.ms": "1"}, "b": {"segment.ms": "2"}})
    cache = ctl.server.info.state.cache  # type: ignore[attr-defined]
    assert dict(cache.snapshot.topic_configs) == {"a": {"retention.ms": "1"}, "b": {"segment.ms": "2"}}
    _push(ctl, {"a": None, "b": {}})  # null: as it was; a list: the whole new set
    assert dict(cache.snapshot.topic_configs) == {"a": {"retention.ms": "1"}}
    _push(ctl, {"a": {"retention.ms": "3"}}, version=5)  # v5 has no tagged fields: untouched
    assert dict(cache.snapshot.topic_configs) == {"a": {"retention.ms": "1"}}
    _push(ctl, {"a": None, "b": {"segment.ms": "4"}}, full=True)  # FULL: null means none
    assert dict(cache.snapshot.topic_configs) == {"b": {"segment.ms": "4"}}
    _push(ctl, {"a": {"retention.ms": "5"}, "b": {"segment.ms": "4"}}, full=True)
    gone = um.UpdateMetadataPartitionState("", 0, 1, -2, 1, (1,), 0, (1,), ())  # leader -2: deleted
    req = um.UpdateMetadataRequest(
        version=8, controller_id=1, controller_epoch=1, broker_epoch=-1,
        topic_states=(um.UpdateMetadataTopicState("a", topic_id("a"), (gone,)),), live_brokers=(),
    )  # fmt: skip
    assert ctl.request(req).error_code == 0
    assert dict(cache.snapshot.topic_configs) == {"b": {"segment.ms": "4"}}  # a went with its topic


@pytest.mark.parametrize("version", range(5))
async def test_topic_configs_every_version(version: int) -> None:
    ctl, client = _pair()
    _push(ctl, {"t": {"retention.ms": "60000"}})
    (result,) = _describe(client, (TOPIC, "t", None), version=version)
    assert (result.error_code, result.resource_type, result.resource_name) == (0, TOPIC, "t")
    assert [c.name for c in result.configs] == list(TOPIC_CONFIGS)
    by_name = {c.name: c for c in result.configs}
    retention, segment = by_name["retention.ms"], by_name["segment.bytes"]
    assert (retention.value, segment.value) == ("60000", "1073741824")
    assert not any(c.is_sensitive or c.read_only for c in result.configs)
    if version == 0:
        assert (retention.is_default, segment.is_default) == (False, True)
    else:
        assert (retention.config_source, segment.config_source) == (1, 5)
        assert [(s.name, s.value, s.source) for s in retention.synonyms] == [("retention.ms", "60000", 1)]
        assert [(s.name, s.value, s.source) for s in segment.synonyms] == [("log.segment.bytes", "1073741824", 5)]
        assert by_name["segment.ms"].synonyms == ()  # log.roll.ms has no default: Kafka lists none
    if version >= 3:
        assert (retention.config_type, segment.config_type, by_name["cleanup.policy"].config_type) == (5, 3, 7)


async def test_keys_filter_synonyms_off_and_errors() -> None:
    ctl, client = _pair()
    _push(ctl, {"t": {}})
    results = _describe(
        client,
        (TOPIC, "t", ("cleanup.policy", "nope")),
        (TOPIC, "ghost", None),
        (TOPIC, "bad/name", None),
        (BROKER, "2", None),
        (BROKER, "x", None),
        (BROKER, "", None),
        (8, "1", None),
        synonyms=False,
    )
    assert [(c.name, c.value, c.synonyms) for c in results[0].configs] == [("cleanup.policy", "delete", ())]
    assert [(r.error_code, r.error_message) for r in results[1:]] == [
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None),
        (ErrorCode.INVALID_TOPIC_EXCEPTION,
         "Topic name \"bad/name\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"),
        (ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1 or empty string, but received 2"),
        (ErrorCode.INVALID_REQUEST, "Broker id must be an integer, but it is: x"),
        (ErrorCode.NONE, None),
        (ErrorCode.INVALID_REQUEST, "Unsupported resource type: BROKER_LOGGER"),
    ]  # fmt: skip
    assert results[5].configs == ()


async def test_broker_configs() -> None:
    _, client = _pair()
    (result,) = _describe(client, (BROKER, "1", None))
    by_name = {c.name: c for c in result.configs}
    broker_id = by_name["broker.id"]
    assert (broker_id.value, broker_id.config_source, broker_id.read_only) == ("1", 4, True)
    assert [(s.name, s.value, s.source) for s in broker_id.synonyms] == [("broker.id", "1", 4), ("broker.id", "-1", 5)]
    assert by_name["listeners"].value == "PLAINTEXT://127.0.0.1:0,CONTROL://127.0.0.1:0"
    assert (by_name["broker.rack"].value, by_name["broker.rack"].config_source) == (None, 5)
    retention = by_name["log.retention.hours"]
    assert (retention.value, retention.read_only, retention.config_type) == ("168", True, 3)
    assert (by_name["log.retention.ms"].value, by_name["log.retention.ms"].read_only) == (None, False)


async def test_broker_advertises_the_apis_it_serves() -> None:
    """ApiVersions lists exactly the registered handlers, with the new admin APIs' ranges."""
    from kmeta.protocol.api_keys import ApiKey
    from kmeta.protocol.messages import api_versions as av
    from kmeta.server.handlers import HANDLER_MODULES

    _, client = _pair()
    resp = client.request(av.ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1"))
    served = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert len(served) == len(HANDLER_MODULES)
    assert {k: served[k] for k in (32, 33, 44, 60, 75)} == {
        ApiKey.DESCRIBE_CONFIGS: (0, 4),
        ApiKey.ALTER_CONFIGS: (0, 2),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
        ApiKey.DESCRIBE_CLUSTER: (0, 1),
        ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    }
