"""Partition logs: record batches kept as received, in memory or in segment files, with the
offsets, leader-epoch cache and retention of Kafka's ``UnifiedLog`` (pure data: imports
``kmeta.protocol`` and the standard library only)."""

from kmeta.log.append_info import LogAppendInfo
from kmeta.log.config import LogConfig
from kmeta.log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    LogError,
    LogStorageError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from kmeta.log.log_manager import LogManager
from kmeta.log.partition_log import FetchDataInfo, PartitionLog
from kmeta.log.replica_log import EpochEndOffset

__all__ = [
    "CorruptRecordError",
    "EpochEndOffset",
    "FetchDataInfo",
    "InvalidRecordError",
    "InvalidTimestampError",
    "LogAppendInfo",
    "LogConfig",
    "LogError",
    "LogManager",
    "LogStorageError",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "RecordTooLargeError",
]
