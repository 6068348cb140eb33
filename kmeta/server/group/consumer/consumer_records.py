"""The KIP-848 consumer-group records of ``__consumer_offsets``, in Kafka's formats.

Kafka's group-coordinator resources ``ConsumerGroup*Key.json`` / ``*Value.json``: a record key
is a big-endian int16 version followed by the key struct (never flexible), a value an int16
version followed by the value struct (flexible from 0). The key version says what the record
is, so a shard routes by it:

====  ==============================================  =====================================
 key  record                                          value
====  ==============================================  =====================================
  3   ConsumerGroupMetadataKey(group)                 the group epoch
  4   ConsumerGroupPartitionMetadataKey(group)        subscribed topics' ids, names, counts
  5   ConsumerGroupMemberMetadataKey(group, member)   the member's subscription and client
  6   ConsumerGroupTargetAssignmentMetadataKey(group) the target assignment epoch
  7   ConsumerGroupTargetAssignmentMemberKey(g, m)    the member's target partitions
  8   ConsumerGroupCurrentMemberAssignmentKey(g, m)   the member's epoch, state, partitions
====  ==============================================  =====================================

A tombstone (value None) deletes what its key names. The ClassicMemberMetadata tagged field
of the member value (a classic member inside a consumer group) is never written here: kmeta
does not convert groups between protocols; a reader skips it as any unknown tag.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

from kmeta.protocol.codec.schema import F, Message, S
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.errors import CorruptMessageError

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
#: the key versions this module reads and writes
KEY_VERSIONS = frozenset(range(GROUP_METADATA, CURRENT_MEMBER_ASSIGNMENT + 1))

_VERSION = struct.Struct(">h")

#: (key, value) as the coordinator runtime writes them; value None is a tombstone
Record = tuple[bytes, bytes | None]


class ConsumerGroupMetadataValue(NamedTuple):
    version: int = 0
    epoch: int = 0


class TopicMetadata(NamedTuple):
    topic_id: uuid.UUID = ZERO_UUID
    topic_name: str = ""
    num_partitions: int = 0
    partition_metadata: Sequence[PartitionMetadata] = ()


class PartitionMetadata(NamedTuple):
    partition: int = 0
    racks: Sequence[str] = ()


class ConsumerGroupPartitionMetadataValue(NamedTuple):
    version: int = 0
    topics: Sequence[TopicMetadata] = ()


class ConsumerGroupMemberMetadataValue(NamedTuple):
    version: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: Sequence[str] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None


class ConsumerGroupTargetAssignmentMetadataValue(NamedTuple):
    version: int = 0
    assignment_epoch: int = 0


class TopicPartitions(NamedTuple):
    topic_id: uuid.UUID = ZERO_UUID
    partitions: Sequence[int] = ()


class TopicPartition(NamedTuple):
    """The target assignment value's struct (Kafka names it TopicPartition there)."""

    topic_id: uuid.UUID = ZERO_UUID
    partitions: Sequence[int] = ()


class ConsumerGroupTargetAssignmentMemberValue(NamedTuple):
    version: int = 0
    topic_partitions: Sequence[TopicPartition] = ()


class ConsumerGroupCurrentMemberAssignmentValue(NamedTuple):
    version: int = 0
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = 0
    assigned_partitions: Sequence[TopicPartitions] = ()
    partitions_pending_revocation: Sequence[TopicPartitions] = ()


def _key(version: int, *names: str) -> Message[Any]:
    v = str(version)
    return Message(f"Key{version}", None, v, "none", tuple(F(n, "string", v) for n in names))


#: key version -> its struct: (group_id) or (group_id, member_id)
KEYS: dict[int, Message[Any]] = {
    v: _key(v, "group_id") if v in (GROUP_METADATA, PARTITION_METADATA, TARGET_ASSIGNMENT_METADATA)
    else _key(v, "group_id", "member_id")
    for v in sorted(KEY_VERSIONS)
}

GROUP_METADATA_VALUE: Message[ConsumerGroupMetadataValue] = Message(
    "ConsumerGroupMetadataValue", None, "0", "0+",
    (F("epoch", "int32", "0+"),),
    records=(ConsumerGroupMetadataValue,),
)
PARTITION_METADATA_VALUE: Message[ConsumerGroupPartitionMetadataValue] = Message(
    "ConsumerGroupPartitionMetadataValue", None, "0", "0+",
    (
        F("topics", "[]TopicMetadata", "0+",
            F("topic_id", "uuid", "0+"),
            F("topic_name", "string", "0+"),
            F("num_partitions", "int32", "0+"),
            F("partition_metadata", "[]PartitionMetadata", "0+",
                F("partition", "int32", "0+"),
                F("racks", "[]string", "0+"),
            ),
        ),
    ),
    records=(ConsumerGroupPartitionMetadataValue, TopicMetadata, PartitionMetadata),
)
MEMBER_METADATA_VALUE: Message[ConsumerGroupMemberMetadataValue] = Message(
    "ConsumerGroupMemberMetadataValue", None, "0", "0+",
    (
        F("instance_id", "string", "0+", nullable="0+", default=None),
        F("rack_id", "string", "0+", nullable="0+", default=None),
        F("client_id", "string", "0+"),
        F("client_host", "string", "0+"),
        F("subscribed_topic_names", "[]string", "0+"),
        F("subscribed_topic_regex", "string", "0+", nullable="0+", default=None),
        F("rebalance_timeout_ms", "int32", "0+", default=-1),
        F("server_assignor", "string", "0+", nullable="0+", default=None),
    ),
    records=(ConsumerGroupMemberMetadataValue,),
)
TARGET_ASSIGNMENT_METADATA_VALUE: Message[ConsumerGroupTargetAssignmentMetadataValue] = Message(
    "ConsumerGroupTargetAssignmentMetadataValue", None, "0", "0+",
    (F("assignment_epoch", "int32", "0+"),),
    records=(ConsumerGroupTargetAssignmentMetadataValue,),
)
TARGET_ASSIGNMENT_MEMBER_VALUE: Message[ConsumerGroupTargetAssignmentMemberValue] = Message(
    "ConsumerGroupTargetAssignmentMemberValue", None, "0", "0+",
    (
        F("topic_partitions", "[]TopicPartition", "0+",
            F("topic_id", "uuid", "0+"),
            F("partitions", "[]int32", "0+"),
        ),
    ),
    records=(ConsumerGroupTargetAssignmentMemberValue, TopicPartition),
)
CURRENT_MEMBER_ASSIGNMENT_VALUE: Message[ConsumerGroupCurrentMemberAssignmentValue] = Message(
    "ConsumerGroupCurrentMemberAssignmentValue", None, "0", "0+",
    (
        F("member_epoch", "int32", "0+"),
        F("previous_member_epoch", "int32", "0+"),
        F("state", "int8", "0+"),
        F("assigned_partitions", "[]TopicPartitions", "0+"),
        F("partitions_pending_revocation", "[]TopicPartitions", "0+"),
    ),
    common=(S("TopicPartitions", F("topic_id", "uuid", "0+"), F("partitions", "[]int32", "0+")),),
    records=(ConsumerGroupCurrentMemberAssignmentValue, TopicPartitions),
)


def key_version(key: bytes) -> int:
    """The version that opens a record key (-1 when the key is too short to have one)."""
    return _VERSION.unpack_from(key)[0] if len(key) >= 2 else -1


def encode_key(version: int, group_id: str, member_id: str | None = None) -> bytes:
    message = KEYS[version]
    fields = (group_id,) if member_id is None else (group_id, member_id)
    return _VERSION.pack(version) + message.encode(message.cls(version, *fields))


def decode_key(key: bytes) -> tuple[int, str, str | None]:
    """(key version, group id, member id or None); raises CorruptMessageError on bytes that
    are not one of these keys."""
    version = key_version(key)
    message = KEYS.get(version)
    if message is None:
        raise CorruptMessageError(f"not a consumer group record key (version {version})")
    decoded = message.decode(key[2:], version)
    return version, decoded.group_id, getattr(decoded, "member_id", None)


def encode_value(
    message: Message[ConsumerGroupMetadataValue]
    | Message[ConsumerGroupPartitionMetadataValue]
    | Message[ConsumerGroupMemberMetadataValue]
    | Message[ConsumerGroupTargetAssignmentMetadataValue]
    | Message[ConsumerGroupTargetAssignmentMemberValue]
    | Message[ConsumerGroupCurrentMemberAssignmentValue],
    value: NamedTuple,
) -> bytes:
    return _VERSION.pack(value[0]) + message.encode(value)  # type: ignore[arg-type]


def value_version(value: bytes) -> int:
    return _VERSION.unpack_from(value)[0] if len(value) >= 2 else -1
