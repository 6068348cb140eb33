"""Offset records of ``__consumer_offsets``: OffsetCommitKey (v0-1) and OffsetCommitValue (v0-4).

The formats are Kafka's (apache/kafka ``group-coordinator/src/main/resources/common/message/
OffsetCommitKey.json`` and ``OffsetCommitValue.json``), declared with the project's schema DSL,
so a Kafka tool reading the topic (``kafka-console-consumer --formatter
...OffsetsMessageFormatter``) decodes what kmeta writes. Each key and value is an int16 version
followed by the struct at that version; a tombstone (an offset deleted or expired) has no value.

* Key versions 0 and 1 are offset commits (2 is GroupMetadataKey, 3+ the consumer-group
  records): the groups shard routes a record here by its key version.
* Values are written as Kafka 3.x does (``MetadataVersion.offsetCommitValueVersion``): v1 when
  the commit carries an explicit expire timestamp (OffsetCommit v2-v4 with a retention time),
  else v3 (leader epoch, no expire timestamp). v0, v2 and the flexible v4 are read.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kmeta.protocol.codec.schema import F, Message
from kmeta.protocol.errors import CorruptMessageError

#: a record as the coordinator runtime writes it: (key, value); value None is a tombstone
Record = tuple[bytes, bytes | None]
#: key versions that are offset commits (GroupMetadataKey is 2)
OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
#: what Kafka writes: key v1; value v3, or v1 with an expire timestamp
KEY_VERSION = 1
VALUE_VERSION = 3
VALUE_VERSION_WITH_EXPIRE = 1
_VERSION = struct.Struct(">h")


class OffsetCommitKey(NamedTuple):
    version: int = KEY_VERSION
    group: str = ""
    topic: str = ""
    partition: int = 0


class OffsetCommitValue(NamedTuple):
    version: int = 4
    offset: int = 0
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: int = -1


KEY: Message[OffsetCommitKey] = Message(
    "OffsetCommitKey",
    api_key=None,
    valid="0-1",
    flexible="none",
    fields=(
        F("group", "string", "0-1"),
        F("topic", "string", "0-1"),
        F("partition", "int32", "0-1"),
    ),
    records=(OffsetCommitKey,),
)

VALUE: Message[OffsetCommitValue] = Message(
    "OffsetCommitValue",
    api_key=None,
    valid="0-4",
    flexible="4+",
    fields=(
        F("offset", "int64", "0+"),
        F("leader_epoch", "int32", "3+", default=-1),
        F("metadata", "string", "0+"),
        F("commit_timestamp", "int64", "0+"),
        F("expire_timestamp", "int64", "1", default=-1),
    ),
    records=(OffsetCommitValue,),
)


def record_key_version(key: bytes) -> int:
    """The version a ``__consumer_offsets`` key starts with (what routes it to its manager)."""
    if len(key) < 2:
        raise CorruptMessageError(f"a __consumer_offsets key of {len(key)} bytes has no version")
    return int(_VERSION.unpack_from(key)[0])


def encode_key(group: str, topic: str, partition: int) -> bytes:
    key = OffsetCommitKey(KEY_VERSION, group, topic, partition)
    return _VERSION.pack(KEY_VERSION) + KEY.encode(key)


def decode_key(data: bytes) -> OffsetCommitKey:
    version = record_key_version(data)
    if version not in OFFSET_COMMIT_KEY_VERSIONS:
        raise CorruptMessageError(f"key version {version} is not an offset commit key")
    return KEY.decode(data, version, 2)._replace(version=version)


def encode_value(
    offset: int, leader_epoch: int, metadata: str, commit_timestamp_ms: int, expire_timestamp_ms: int | None
) -> bytes:
    version = VALUE_VERSION if expire_timestamp_ms is None else VALUE_VERSION_WITH_EXPIRE
    value = OffsetCommitValue(
        version, offset, leader_epoch, metadata, commit_timestamp_ms,
        -1 if expire_timestamp_ms is None else expire_timestamp_ms,
    )  # fmt: skip
    return _VERSION.pack(version) + VALUE.encode(value)


def decode_value(data: bytes) -> OffsetCommitValue:
    if len(data) < 2:
        raise CorruptMessageError(f"an OffsetCommitValue of {len(data)} bytes has no version")
    version = int(_VERSION.unpack_from(data)[0])
    if not 0 <= version <= VALUE.max_version:
        raise CorruptMessageError(f"OffsetCommitValue version {version} is unknown")
    return VALUE.decode(data, version, 2)._replace(version=version)


def offset_commit_record(
    group: str, topic: str, partition: int, offset: int, leader_epoch: int, metadata: str,
    commit_timestamp_ms: int, expire_timestamp_ms: int | None = None,
) -> Record:  # fmt: skip
    """``GroupCoordinatorRecordHelpers.newOffsetCommitRecord``."""
    return (
        encode_key(group, topic, partition),
        encode_value(offset, leader_epoch, metadata, commit_timestamp_ms, expire_timestamp_ms),
    )


def offset_commit_tombstone(group: str, topic: str, partition: int) -> Record:
    """``GroupCoordinatorRecordHelpers.newOffsetCommitTombstoneRecord``."""
    return (encode_key(group, topic, partition), None)
