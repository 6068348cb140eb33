"""DescribeConfigs (api key 32): versions 0-4, client and control listeners.

Answered by the broker itself (Kafka's ``ConfigHelper.describeConfigs``), from its cache
snapshot (topic overrides, pushed by the controller on UpdateMetadata) and its own config:

* TOPIC (2): a name that is not a legal topic name: INVALID_TOPIC_EXCEPTION with Kafka's
  message; not in the cache: UNKNOWN_TOPIC_OR_PARTITION. Otherwise every topic config Kafka
  defines (:mod:`kmeta.metadata.log_config`), or those of ``configuration_keys`` when it is
  non-empty: the topic override (source TOPIC_CONFIG, 1) or the default (DEFAULT_CONFIG, 5;
  kmeta brokers set none of the ``log.*`` server synonyms). Synonyms (v1+, when asked): the
  override, then the first server synonym's default when it has one, as Kafka lists them.
* BROKER (4): the empty name is the cluster-wide dynamic defaults (none: no configs); this
  broker's id: its static settings (broker.id, broker.rack, listeners,
  advertised.listeners when set: STATIC_BROKER_CONFIG, 4; unset: null, DEFAULT_CONFIG) and the server synonyms of the topic
  configs with their defaults; another broker's id or a non-integer: INVALID_REQUEST with
  Kafka's message.
* With an authorizer: DESCRIBE_CONFIGS on the topic (TOPIC) or the cluster (BROKER), else
  TOPIC_AUTHORIZATION_FAILED / CLUSTER_AUTHORIZATION_FAILED with no configs.
* Any other resource type: INVALID_REQUEST ("Unsupported resource type: ...").
* Config type (v3+) is each config's ConfigDef type; documentation is not sent (null);
  nothing here is sensitive. v0's is_default is true for DEFAULT_CONFIG values.

Versions: v1 include_synonyms, config source and synonyms; v2 same as v1; v3 config type and
documentation; v4 flexible.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kmeta.metadata.log_config import (
    DYNAMIC_SERVER_CONFIGS,
    INT,
    SERVER_CONFIGS,
    STRING,
    TOPIC_CONFIGS,
)
from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.net.security.acl import AclOperation
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import describe_configs as dcf
from kmeta.server.config import BrokerConfig
from kmeta.server.handlers.metadata import MAX_TOPIC_NAME, is_valid_topic_name
from kmeta.server.state import BrokerContext, BrokerRegistry
from kmeta.server.topic_authorization import configs_allowed, configs_authorization_error

TOPIC, BROKER = 2, 4
#: ConfigResource.Type names (Kafka's messages use them)
RESOURCE_TYPES = {2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS", 32: "GROUP"}
#: ConfigSource ids
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5

#: (name, value, source) of one synonym
Synonym = tuple[str, str | None, int]


def _entry(
    version: int, name: str, value: str | None, type_: int, read_only: bool,
    synonyms: list[Synonym], include_synonyms: bool,
) -> dcf.DescribeConfigsResourceResult:  # fmt: skip
    source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
    return dcf.DescribeConfigsResourceResult(
        name=name,
        value=value,
        read_only=read_only,
        is_default=source == DEFAULT_CONFIG,
        config_source=source,
        is_sensitive=False,
        synonyms=tuple(dcf.DescribeConfigsSynonym(*s) for s in synonyms) if include_synonyms and version >= 1 else (),
        config_type=type_,
        documentation=None,
    )


def _wanted(keys: Sequence[str] | None, names: Iterable[str]) -> list[str]:
    if not keys:
        return list(names)
    asked = set(keys)
    return [n for n in names if n in asked]


def topic_entries(overrides: Mapping[str, str], keys: Sequence[str] | None, version: int, synonyms: bool) -> tuple[dcf.DescribeConfigsResourceResult, ...]:
    out = []
    for name in _wanted(keys, TOPIC_CONFIGS):
        d = TOPIC_CONFIGS[name]
        chain: list[Synonym] = []
        value = overrides.get(name)
        if value is not None:
            chain.append((name, value, TOPIC_CONFIG))
        if d.server_synonyms and d.server_default is not None:
            chain.append((d.server_synonyms[0], d.server_default, DEFAULT_CONFIG))
        out.append(_entry(version, name, d.default if value is None else value, d.type, False, chain, synonyms))
    return tuple(out)


def broker_entries(config: BrokerConfig, keys: Sequence[str] | None, version: int, synonyms: bool) -> tuple[dcf.DescribeConfigsResourceResult, ...]:
    # unset advertised.listeners is null (DEFAULT_CONFIG), as Kafka 3.x answers: the broker
    # advertises its listeners, but the config itself has no value
    advertised = ",".join(map(str, config.advertised_listeners)) or None
    static: dict[str, tuple[int, str | None, bool, str | None]] = {  # type, value, read-only, default
        "broker.id": (INT, str(config.broker_id), True, "-1"),
        "broker.rack": (STRING, config.rack, True, None),
        "listeners": (STRING, ",".join(map(str, config.listeners)), False, "PLAINTEXT://:9092"),
        "advertised.listeners": (STRING, advertised, False, None),
    }
    names = [*static, *SERVER_CONFIGS]
    out = []
    for name in _wanted(keys, names):
        if name in static:
            type_, value, read_only, default = static[name]
            chain: list[Synonym] = [] if value is None else [(name, value, STATIC_BROKER_CONFIG)]
        else:
            (type_, default), value = SERVER_CONFIGS[name], None
            read_only, chain = name not in DYNAMIC_SERVER_CONFIGS, []
        if default is not None:
            chain.append((name, default, DEFAULT_CONFIG))
        value = value if value is not None else default
        out.append(_entry(version, name, value, type_, read_only, chain, synonyms))
    return tuple(out)


def _illegal_topic(name: str) -> str:
    """Kafka's Topic.validate messages."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters, topic name: {name}"
    return f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"


def _describe(snap: MetadataSnapshot, config: BrokerConfig, r: dcf.DescribeConfigsResource, version: int, synonyms: bool) -> dcf.DescribeConfigsResult:
    kind, name, keys = r.resource_type, r.resource_name, r.configuration_keys

    def result(error: ErrorCode, message: str | None = None, configs: tuple[dcf.DescribeConfigsResourceResult, ...] = ()) -> dcf.DescribeConfigsResult:
        return dcf.DescribeConfigsResult(error, message, kind, name, configs)

    if kind == TOPIC:
        if not is_valid_topic_name(name):
            return result(ErrorCode.INVALID_TOPIC_EXCEPTION, _illegal_topic(name))
        if name not in snap.partition_states:
            return result(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return result(ErrorCode.NONE, None, topic_entries(snap.topic_configs.get(name, {}), keys, version, synonyms))
    if kind == BROKER:
        if not name:
            return result(ErrorCode.NONE)  # no dynamic cluster-wide defaults
        try:
            broker_id = int(name)
        except ValueError:
            return result(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}")
        if broker_id != config.broker_id:
            return result(
                ErrorCode.INVALID_REQUEST,
                f"Unexpected broker id, expected {config.broker_id} or empty string, but received {name}",
            )
        return result(ErrorCode.NONE, None, broker_entries(config, keys, version, synonyms))
    return result(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {RESOURCE_TYPES.get(kind, 'UNKNOWN')}")


def _refused(resource: dcf.DescribeConfigsResource) -> dcf.DescribeConfigsResult:
    error = configs_authorization_error(resource.resource_type)
    return dcf.DescribeConfigsResult(
        error_code=error, error_message=error.message, resource_type=resource.resource_type,
        resource_name=resource.resource_name, configs=(),
    )  # fmt: skip


def handle(ctx: BrokerContext, request: dcf.DescribeConfigsRequest) -> dcf.DescribeConfigsResponse:
    snap: MetadataSnapshot = ctx.state.cache.snapshot
    config: BrokerConfig = ctx.state.config
    version: int = request.version
    synonyms = version >= 1 and request.include_synonyms
    return dcf.DescribeConfigsResponse(
        version=version,
        results=tuple(
            _describe(snap, config, r, version, synonyms)
            if configs_allowed(ctx, AclOperation.DESCRIBE_CONFIGS, r.resource_type, r.resource_name)
            else _refused(r)
            for r in request.resources
        ),
    )


def register(registry: BrokerRegistry) -> None:
    registry.register(dcf.API, handle)
