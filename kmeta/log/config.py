"""A partition log's topic-level configuration (Kafka's ``LogConfig``), read from a topic's
config overrides as the controller keeps them (strings, Kafka's names)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields

#: Long.MAX_VALUE: "no bound" for the timestamp windows, Kafka 3.9's defaults
LONG_MAX = (1 << 63) - 1

_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_POLICIES = frozenset({"compact", "delete"})


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1_073_741_824  # segment.bytes
    retention_bytes: int = -1  # retention.bytes (-1: unbounded)
    retention_ms: int = 604_800_000  # retention.ms (-1: unbounded)
    max_message_bytes: int = 1_048_588  # max.message.bytes
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type
    min_insync_replicas: int = 1  # min.insync.replicas (the replica manager reads it)
    index_interval_bytes: int = 4096  # index.interval.bytes (sparse offset index spacing)
    message_timestamp_before_max_ms: int = LONG_MAX  # message.timestamp.before.max.ms
    message_timestamp_after_max_ms: int = LONG_MAX  # message.timestamp.after.max.ms
    segment_ms: int = 604_800_000  # segment.ms (the active segment rolls once this old)
    cleanup_policy: str = "delete"  # cleanup.policy: "delete", "compact" or "compact,delete"
    delete_retention_ms: int = 86_400_000  # delete.retention.ms (tombstones and markers)
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = LONG_MAX  # max.compaction.lag.ms

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def compact(self) -> bool:
        """The log cleaner compacts this log (Kafka's ``LogConfig.compact``)."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        """Retention (time, size, the memory cap) may delete its old segments."""
        return "delete" in self.cleanup_policy.split(",")

    @classmethod
    def from_topic_configs(cls, configs: Mapping[str, str]) -> LogConfig:
        """A topic's overrides over Kafka's defaults. A value Kafka's validation would refuse
        (not a number, below its minimum, an unknown timestamp type) keeps the default: the
        controller already answered INVALID_CONFIG for it, so this only guards old state."""
        values: dict[str, object] = {}
        for field in fields(cls):
            key = field.name.replace("_", ".")
            raw = configs.get(key)
            if raw is None:
                continue
            if field.name == "cleanup_policy":
                items = sorted({item.strip() for item in raw.split(",") if item.strip()})
                if set(items) <= _POLICIES:  # (an empty list: neither, as Kafka allows)
                    values[field.name] = ",".join(items)
                continue
            check = _CHECKS.get(field.name)
            if check is None:  # message.timestamp.type
                if raw in _TIMESTAMP_TYPES:
                    values[field.name] = raw
                continue
            value: int | float
            try:
                value = float(raw) if field.name == "min_cleanable_dirty_ratio" else int(raw)
            except ValueError:
                continue
            if check(value):
                values[field.name] = value
        return cls(**values)  # type: ignore[arg-type]


#: Kafka's lower bounds (LogConfig's ConfigDef): segment.bytes >= LegacyRecord.RECORD_OVERHEAD_V0
_CHECKS: dict[str, Callable[[float], bool]] = {
    "segment_bytes": lambda v: 14 <= v <= (1 << 31) - 1,
    "retention_bytes": lambda v: True,
    "retention_ms": lambda v: v >= -1,
    "max_message_bytes": lambda v: 0 <= v <= (1 << 31) - 1,
    "min_insync_replicas": lambda v: v >= 1,
    "index_interval_bytes": lambda v: 0 <= v <= (1 << 31) - 1,
    "message_timestamp_before_max_ms": lambda v: v >= 0,
    "message_timestamp_after_max_ms": lambda v: v >= 0,
    "segment_ms": lambda v: v >= 1,
    "delete_retention_ms": lambda v: v >= 0,
    "min_cleanable_dirty_ratio": lambda v: 0 <= v <= 1,
    "min_compaction_lag_ms": lambda v: v >= 0,
    "max_compaction_lag_ms": lambda v: v >= 1,
}
