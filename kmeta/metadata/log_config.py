"""Kafka's topic configs (``LogConfig``): names, types, defaults, validators, server synonyms.

The one definition the controller validates alterations with and the broker describes topics
with. Restated from Kafka 3.9's ``LogConfig`` (names from ``TopicConfig``, defaults from
``ServerLogConfigs``) and ``ServerTopicConfigSynonyms``: a topic config's value is its topic
override when there is one, else the broker's value of its server synonym, else the default.
kmeta brokers set none of the ``log.*`` broker configs, so that is the default.

Values are parsed as Kafka's ``ConfigDef.parseType`` does (trimmed; INT/LONG/DOUBLE numbers,
BOOLEAN true/false in any case, LIST split on commas) and kept in the form
``ConfigDef.convertToString`` gives back (``" 100 "`` is kept as ``"100"``), which is what a
Kafka broker's DescribeConfigs shows. Error messages are Kafka's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: DescribeConfigs ConfigType ids (``DescribeConfigsResponse.ConfigType``)
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = range(1, 10)
TYPE_NAMES = {BOOLEAN: "BOOLEAN", STRING: "STRING", INT: "INT", LONG: "LONG", DOUBLE: "DOUBLE", LIST: "LIST"}

LONG_MAX = str(2**63 - 1)
_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)
_NUMBER = re.compile(r"[+-]?\d+")
_LIST_SPLIT = re.compile(r"\s*,\s*")

#: a parsed value -> why it is invalid, or None
Validator = Callable[[Any], "str | None"]


class ConfigError(ValueError):
    """A value Kafka's ConfigDef rejects; ``str()`` is Kafka's message."""


def _at_least(low: float) -> Validator:
    def check(v: Any) -> str | None:
        return None if v >= low else f"Value must be at least {_num(low)}"

    return check


def _between(low: float, high: float) -> Validator:
    def check(v: Any) -> str | None:
        if v < low:
            return f"Value must be at least {_num(low)}"
        return None if v <= high else f"Value must be no more than {_num(high)}"

    return check


def _one_of(*choices: str) -> Validator:
    def check(v: Any) -> str | None:
        return None if v in choices else f"String must be one of: {', '.join(choices)}"

    return check


def _list_of(*choices: str) -> Validator:
    def check(v: Any) -> str | None:
        for item in v:
            if item not in choices:
                return f"Invalid value {item} for configuration {{name}}: String must be one of: {', '.join(choices)}"
        return None

    return check


def _gzip_level(v: Any) -> str | None:
    return None if v == -1 or 1 <= v <= 9 else "Value must be between 1 and 9, or -1"


_THROTTLED = re.compile(r"\*|(\d+:\d+)(,\d+:\d+)*")


def _throttled_replicas(v: Any) -> str | None:
    text = ",".join(v)
    if not text or _THROTTLED.fullmatch(text):
        return None
    return "Must be a list of the form [PartitionId]:[BrokerId],[PartitionId]:[BrokerId],... or the wildcard '*'"


_VERSION = re.compile(r"\d+\.\d+(\.\d+)?(-IV\d+)?")


def _format_version(v: Any) -> str | None:
    return None if isinstance(v, str) and _VERSION.fullmatch(v) else f"Version `{v}` is not a valid version"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    type: int
    default: str
    validator: Validator | None = None
    #: the broker configs that set this one's default, in priority order (Kafka's synonyms)
    server_synonyms: tuple[str, ...] = ()
    #: the Kafka default of the first server synonym (None when it has none)
    server_default: str | None = None

    def parse(self, raw: str) -> str:
        """The value as Kafka keeps it; raises ConfigError with Kafka's message."""
        value = raw.strip()
        parsed: object
        if self.type in (INT, LONG):
            low, high = _INT_RANGE if self.type == INT else _LONG_RANGE
            if not _NUMBER.fullmatch(value) or not low <= int(value) <= high:
                raise ConfigError(self._invalid(raw, f"Not a number of type {TYPE_NAMES[self.type]}"))
            parsed = int(value)
        elif self.type == DOUBLE:
            try:
                parsed = float(value)
            except ValueError:
                raise ConfigError(self._invalid(raw, "Not a number of type DOUBLE")) from None
        elif self.type == BOOLEAN:
            if value.lower() not in ("true", "false"):
                raise ConfigError(self._invalid(raw, "Expected value to be either true or false"))
            parsed = value.lower() == "true"
        elif self.type == LIST:
            parsed = [] if not value else _LIST_SPLIT.split(value)
        else:
            parsed = value
        if self.validator is not None:
            problem = self.validator(parsed)
            if problem is not None:
                if "{name}" in problem:
                    raise ConfigError(problem.format(name=self.name))
                raise ConfigError(self._invalid(raw, problem))
        return _to_string(parsed)

    def _invalid(self, raw: str, why: str) -> str:
        return f"Invalid value {raw} for configuration {self.name}: {why}"


def _to_string(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return ",".join(v)
    if isinstance(v, float):
        return repr(v)  # Java's Double.toString for the usual values ("0.5", "1.0")
    return str(v)


def _def(
    name: str, type_: int, default: str, validator: Validator | None = None, synonyms: tuple[str, ...] = (),
    server_default: str | None = None,
) -> TopicConfigDef:  # fmt: skip
    return TopicConfigDef(name, type_, default, validator, synonyms, server_default)


_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
WEEK_MS = str(7 * 24 * 3600 * 1000)

#: every topic config Kafka 3.9 defines, in LogConfig's order
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in (
    _def("segment.bytes", INT, str(1024**3), _at_least(14), ("log.segment.bytes",), str(1024**3)),
    _def("segment.ms", LONG, WEEK_MS, _at_least(1), ("log.roll.ms", "log.roll.hours")),
    _def("segment.jitter.ms", LONG, "0", _at_least(0), ("log.roll.jitter.ms", "log.roll.jitter.hours")),
    _def("segment.index.bytes", INT, "10485760", _at_least(4), ("log.index.size.max.bytes",), "10485760"),
    _def("flush.messages", LONG, LONG_MAX, _at_least(1), ("log.flush.interval.messages",), LONG_MAX),
    _def("flush.ms", LONG, LONG_MAX, _at_least(0), ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")),
    _def("retention.bytes", LONG, "-1", None, ("log.retention.bytes",), "-1"),
    _def("retention.ms", LONG, WEEK_MS, _at_least(-1),
         ("log.retention.ms", "log.retention.minutes", "log.retention.hours")),
    _def("max.message.bytes", INT, "1048588", _at_least(0), ("message.max.bytes",), "1048588"),
    _def("index.interval.bytes", INT, "4096", _at_least(0), ("log.index.interval.bytes",), "4096"),
    _def("delete.retention.ms", LONG, "86400000", _at_least(0), ("log.cleaner.delete.retention.ms",), "86400000"),
    _def("min.compaction.lag.ms", LONG, "0", _at_least(0), ("log.cleaner.min.compaction.lag.ms",), "0"),
    _def("max.compaction.lag.ms", LONG, LONG_MAX, _at_least(1), ("log.cleaner.max.compaction.lag.ms",), LONG_MAX),
    _def("file.delete.delay.ms", LONG, "60000", _at_least(0), ("log.segment.delete.delay.ms",), "60000"),
    _def("min.cleanable.dirty.ratio", DOUBLE, "0.5", _between(0, 1), ("log.cleaner.min.cleanable.ratio",), "0.5"),
    _def("cleanup.policy", LIST, "delete", _list_of("compact", "delete"), ("log.cleanup.policy",), "delete"),
    _def("unclean.leader.election.enable", BOOLEAN, "false", None, ("unclean.leader.election.enable",), "false"),
    _def("min.insync.replicas", INT, "1", _at_least(1), ("min.insync.replicas",), "1"),
    _def("compression.type", STRING, "producer", _one_of(*_COMPRESSION), ("compression.type",), "producer"),
    _def("compression.gzip.level", INT, "-1", _gzip_level, ("compression.gzip.level",), "-1"),
    _def("compression.lz4.level", INT, "9", _between(1, 17), ("compression.lz4.level",), "9"),
    _def("compression.zstd.level", INT, "3", _between(-131072, 22), ("compression.zstd.level",), "3"),
    _def("preallocate", BOOLEAN, "false", None, ("log.preallocate",), "false"),
    _def("message.format.version", STRING, "3.0-IV1", _format_version, ("log.message.format.version",), "3.0-IV1"),
    _def("message.timestamp.type", STRING, "CreateTime", _one_of("CreateTime", "LogAppendTime"),
         ("log.message.timestamp.type",), "CreateTime"),
    _def("message.timestamp.difference.max.ms", LONG, LONG_MAX, _at_least(0),
         ("log.message.timestamp.difference.max.ms",), LONG_MAX),
    _def("message.timestamp.before.max.ms", LONG, LONG_MAX, _at_least(0),
         ("log.message.timestamp.before.max.ms",), LONG_MAX),
    _def("message.timestamp.after.max.ms", LONG, LONG_MAX, _at_least(0),
         ("log.message.timestamp.after.max.ms",), LONG_MAX),
    _def("leader.replication.throttled.replicas", LIST, "", _throttled_replicas),
    _def("follower.replication.throttled.replicas", LIST, "", _throttled_replicas),
    _def("message.downconversion.enable", BOOLEAN, "true", None, ("log.message.downconversion.enable",), "true"),
    _def("remote.storage.enable", BOOLEAN, "false"),
    _def("local.retention.ms", LONG, "-2", _at_least(-2), ("log.local.retention.ms",), "-2"),
    _def("local.retention.bytes", LONG, "-2", _at_least(-2), ("log.local.retention.bytes",), "-2"),
    _def("remote.log.copy.disable", BOOLEAN, "false"),
    _def("remote.log.delete.on.disable", BOOLEAN, "false"),
)}  # fmt: skip

#: incremental operations (``AlterConfigOp.OpType``)
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def validate(configs: Mapping[str, str]) -> dict[str, str]:
    """Kafka's ``LogConfig.validate``: the configs as kept, or ConfigError (unknown name, bad
    value) with Kafka's message."""
    out: dict[str, str] = {}
    for name, value in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise ConfigError(f"Unknown topic config name: {name}")
        out[name] = definition.parse(value)
    return out


def apply_incremental(current: Mapping[str, str], ops: list[tuple[str, int, str | None]]) -> dict[str, str]:
    """Kafka's ``prepareIncrementalConfigs``: the overrides after SET/DELETE/APPEND/SUBTRACT
    (not yet validated). APPEND and SUBTRACT are for LIST configs only and start from the
    default when the topic has no override."""
    props = dict(current)
    for name, op, value in ops:
        if op == SET:
            props[name] = value or ""
        elif op == DELETE:
            props.pop(name, None)
        else:
            definition = TOPIC_CONFIGS.get(name)
            if definition is None:
                raise ConfigError(f"Unknown topic config name: {name}")
            if definition.type != LIST:
                verb = "append" if op == APPEND else "subtract"
                raise ConfigError(f"Config value {verb} is not allowed for config key: {name}")
            old = props.get(name, definition.default)
            items = [s for s in old.split(",") if s] if op == APPEND else old.split(",")
            given = (value or "").split(",")
            if op == APPEND:
                items += [s for s in given if s not in items]
            else:
                items = [s for s in items if s not in given]
            props[name] = ",".join(items)
    return props


#: the broker configs that are server synonyms of topic configs -> (type, Kafka default or
#: None): every synonym, in the topic configs' order (the secondary ones, e.g.
#: log.retention.hours, with their own types and defaults)
_SECONDARY: dict[str, tuple[int, str | None]] = {
    "log.roll.hours": (INT, "168"),
    "log.roll.jitter.hours": (INT, "0"),
    "log.retention.minutes": (INT, None),
    "log.retention.hours": (INT, "168"),
    "log.flush.scheduler.interval.ms": (LONG, LONG_MAX),
}
SERVER_CONFIGS: dict[str, tuple[int, str | None]] = {}
for _d in TOPIC_CONFIGS.values():
    for _i, _name in enumerate(_d.server_synonyms):
        SERVER_CONFIGS[_name] = (_d.type, _d.server_default) if _i == 0 else _SECONDARY[_name]
#: the server synonyms a Kafka broker can change at run time (DynamicLogConfig: the first
#: synonym of each topic config); the others are read-only
DYNAMIC_SERVER_CONFIGS = frozenset(d.server_synonyms[0] for d in TOPIC_CONFIGS.values() if d.server_synonyms)
