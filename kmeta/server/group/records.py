"""Group metadata records in ``__consumer_offsets``, in Kafka's own format.

A record's key and value each start with an int16 version. The key version names the record
type (Kafka's ``CoordinatorRecordType``): 0 and 1 are offset commits (OffsetCommitKey, owned by
the offsets code), 2 is a classic group's metadata (GroupMetadataKey), 3 and up are the KIP-848
consumer-group records. A GroupMetadataValue follows its own int16 version (0-4, flexible from
4); kmeta writes version 3, as Kafka 3.x and 4.x brokers do, and reads all five. A value of
None is a tombstone: the group was deleted.

Schemas: apache/kafka ``group-coordinator/src/main/resources/common/message/GroupMetadataKey.json``
and ``GroupMetadataValue.json``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from kmeta.protocol.codec.schema import F, Message, S
from kmeta.protocol.errors import CorruptMessageError

#: the key version of a classic group's metadata record
GROUP_METADATA_KEY_VERSION = 2
#: the value version written (Kafka's MetadataVersion.groupMetadataValueVersion: 3)
GROUP_METADATA_VALUE_VERSION = 3
_INT16 = struct.Struct(">h")


class GroupMetadataKey(NamedTuple):
    version: int = 0
    group: str = ""


class MemberMetadata(NamedTuple):
    member_id: str = ""
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout: int = 0
    session_timeout: int = 0
    subscription: bytes = b""
    assignment: bytes = b""


class GroupMetadataValue(NamedTuple):
    version: int = 4
    protocol_type: str = ""
    generation: int = 0
    protocol: str | None = ""
    leader: str | None = ""
    current_state_timestamp: int = -1
    members: Sequence[MemberMetadata] = ()


KEY: Message[GroupMetadataKey] = Message(
    "GroupMetadataKey",
    api_key=None,
    valid="0",
    flexible="none",
    fields=(F("group", "string", "0"),),
    records=(GroupMetadataKey,),
)

VALUE: Message[GroupMetadataValue] = Message(
    "GroupMetadataValue",
    api_key=None,
    valid="0-4",
    flexible="4+",
    fields=(
        F("protocol_type", "string", "0+"),
        F("generation", "int32", "0+"),
        F("protocol", "string", "0+", nullable="0+"),
        F("leader", "string", "0+", nullable="0+"),
        F("current_state_timestamp", "int64", "2+", default=-1),
        F("members", "[]MemberMetadata", "0+"),
    ),
    common=(
        S(
            "MemberMetadata",
            F("member_id", "string", "0+"),
            F("group_instance_id", "string", "3+", nullable="3+", default=None),
            F("client_id", "string", "0+"),
            F("client_host", "string", "0+"),
            F("rebalance_timeout", "int32", "1+"),
            F("session_timeout", "int32", "0+"),
            F("subscription", "bytes", "0+"),
            F("assignment", "bytes", "0+"),
        ),
    ),
    records=(GroupMetadataValue, MemberMetadata),
)


def key_version(key: bytes) -> int:
    """The record type of a ``__consumer_offsets`` key (its leading int16)."""
    if len(key) < 2:
        raise CorruptMessageError(f"a __consumer_offsets key of {len(key)} bytes")
    version: int = _INT16.unpack_from(key)[0]
    return version


def group_metadata_key(group_id: str) -> bytes:
    return _INT16.pack(GROUP_METADATA_KEY_VERSION) + KEY.encode(GroupMetadataKey(0, group_id))


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    version = value.version
    return _INT16.pack(version) + VALUE.encode(value)


def read_group_metadata_key(key: bytes) -> str:
    if key_version(key) != GROUP_METADATA_KEY_VERSION:
        raise CorruptMessageError(f"not a group metadata key (version {key_version(key)})")
    return KEY.decode(key, 0, 2).group


def read_group_metadata_value(value: bytes) -> GroupMetadataValue:
    """A GroupMetadataValue at any version Kafka wrote (0-4); CorruptMessageError otherwise."""
    if len(value) < 2:
        raise CorruptMessageError(f"a group metadata value of {len(value)} bytes")
    version: int = _INT16.unpack_from(value)[0]
    if not VALUE.min_version <= version <= VALUE.max_version:
        raise CorruptMessageError(f"group metadata value version {version}")
    return VALUE.decode(value, version, 2)
