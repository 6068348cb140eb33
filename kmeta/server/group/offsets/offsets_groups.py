"""What the offset APIs ask of a group: Kafka's ``Group.validateOffsetCommit``,
``validateOffsetFetch``, ``validateOffsetDelete``, ``isSubscribedToTopic`` and
``offsetExpirationCondition``, for classic groups (``ClassicGroup``) and for standalone
(simple) consumers, which commit with generation -1 into a group nobody joined.

A group object comes from the groups shard (``group_or_none``). A group that validates offsets
itself (kip848's consumer groups, whose members carry epochs) provides the
:class:`OffsetsGroup` methods and is used as it is; a classic group is read through
:class:`ClassicGroupView`'s attributes, as the contract between the lanes gives them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Protocol, cast, runtime_checkable

from kmeta.protocol.errors import ErrorCode
from kmeta.server.group.offsets.offsets import OffsetMetadataManager
from kmeta.server.group.shard import GroupCoordinatorShard

# ClassicGroupState names (Kafka's ``ClassicGroupState.toString``)
EMPTY, STABLE, DEAD = "Empty", "Stable", "Dead"
PREPARING_REBALANCE, COMPLETING_REBALANCE = "PreparingRebalance", "CompletingRebalance"
CONSUMER_PROTOCOL_TYPE = "consumer"


class MemberView(Protocol):
    def metadata(self, protocol: str | None) -> bytes: ...  # its metadata for that protocol


class ClassicGroupView(Protocol):
    """A classic group as the groups lane exposes it."""

    @property
    def generation_id(self) -> int: ...
    @property
    def state_name(self) -> str: ...  # one of the ClassicGroupState names above
    @property
    def protocol_type(self) -> str | None: ...  # None: a simple group nobody joined
    @property
    def protocol_name(self) -> str | None: ...
    #: when the group entered its current state (ms since the epoch; -1: not known)
    @property
    def current_state_timestamp_ms(self) -> int: ...
    @property
    def members(self) -> Mapping[str, MemberView]: ...
    def has_member(self, member_id: str) -> bool: ...
    def static_member_id(self, group_instance_id: str) -> str | None: ...


@runtime_checkable
class OffsetsGroup(Protocol):
    """A group that checks the offset APIs itself (Kafka's ``Group`` interface)."""

    def validate_offset_commit(
        self, member_id: str, group_instance_id: str | None, generation_or_epoch: int, transactional: bool, api_version: int
    ) -> ErrorCode: ...
    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode: ...
    def validate_offset_delete(self) -> ErrorCode: ...
    def is_subscribed_to_topic(self, topic: str) -> bool: ...
    #: (offset commit ms) -> the ms its retention counts from; None: no offset of it expires
    def offset_expiration_base(self) -> Callable[[int], int] | None: ...


class ClassicOffsets:
    """:class:`OffsetsGroup` for a classic group, from its attributes (``ClassicGroup``)."""

    def __init__(self, group: ClassicGroupView) -> None:
        self.group = group

    def validate_offset_commit(
        self, member_id: str, group_instance_id: str | None, generation_id: int, transactional: bool, api_version: int
    ) -> ErrorCode:
        g = self.group
        state = g.state_name
        if state == DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and state == EMPTY:
            return ErrorCode.NONE  # (the admin client or a standalone consumer: allowed when empty)
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = self._validate_member(member_id, group_instance_id)
            if error is not ErrorCode.NONE:
                return error
            if generation_id != g.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not transactional and state != EMPTY:
            # no member id and no generation (v0): only an empty group takes plain commits
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and state == COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS  # (the member has its generation: it retries)
        return ErrorCode.NONE

    def _validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        if group_instance_id is not None:
            existing = self.group.static_member_id(group_instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        return ErrorCode.NONE if self.group.has_member(member_id) else ErrorCode.UNKNOWN_MEMBER_ID

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        return ErrorCode.GROUP_ID_NOT_FOUND if self.group.state_name == DEAD else ErrorCode.NONE

    def validate_offset_delete(self) -> ErrorCode:
        state = self.group.state_name
        if state == DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if state in (STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE) and not self._consumer_protocol:
            return ErrorCode.NON_EMPTY_GROUP
        return ErrorCode.NONE

    @property
    def _consumer_protocol(self) -> bool:
        return self.group.protocol_type == CONSUMER_PROTOCOL_TYPE

    def is_subscribed_to_topic(self, topic: str) -> bool:
        subscribed = self.subscribed_topics()
        return self._consumer_protocol if subscribed is None else topic in subscribed

    def offset_expiration_base(self) -> Callable[[int], int] | None:
        g = self.group
        if g.protocol_type is None:
            return _commit_time  # a simple group: retention counts from each commit
        if g.state_name == EMPTY:
            emptied = g.current_state_timestamp_ms
            # from when the group became empty (an old group record without it: each commit)
            return _commit_time if emptied < 0 else (lambda _commit: emptied)
        if self._consumer_protocol and self.subscribed_topics() is not None and g.state_name == STABLE:
            return _commit_time  # (for the topics nobody subscribes to any more)
        return None


    def subscribed_topics(self) -> frozenset[str] | None:
        """Kafka's ``computeSubscribedTopics``: the topics of the members' consumer-protocol
        subscriptions; None when the protocol type is not "consumer", no protocol is chosen
        yet, or a member's metadata is not a subscription."""
        g = self.group
        if not self._consumer_protocol:
            return None
        if not g.members:
            return frozenset()
        if g.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in g.members.values():
            parsed = subscription_topics(member.metadata(g.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return frozenset(topics)


class SimpleGroup:
    """A group no member joined: one known only by its offsets (a standalone consumer's, for
    which Kafka keeps an empty classic group without a protocol type) when ``exists``, else
    a group id never seen (Kafka's GroupIdNotFoundException paths)."""

    def __init__(self, exists: bool) -> None:
        self.exists = exists

    def validate_offset_commit(
        self, member_id: str, group_instance_id: str | None, generation_id: int, transactional: bool, api_version: int
    ) -> ErrorCode:
        if generation_id < 0:
            return ErrorCode.NONE  # (the admin client or a standalone consumer: it is empty)
        if self.exists:
            return ErrorCode.UNKNOWN_MEMBER_ID  # (nobody is a member of it)
        if transactional or api_version < 9:
            return ErrorCode.ILLEGAL_GENERATION  # (what clients before KIP-848 expect)
        return ErrorCode.GROUP_ID_NOT_FOUND

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        return ErrorCode.NONE  # (an unknown group's offsets are simply none)

    def validate_offset_delete(self) -> ErrorCode:
        return ErrorCode.NONE if self.exists else ErrorCode.GROUP_ID_NOT_FOUND

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return False

    def offset_expiration_base(self) -> Callable[[int], int] | None:
        return _commit_time


def subscription_topics(metadata: bytes) -> list[str] | None:
    """The topics of a ConsumerProtocolSubscription (any version: each starts with an int16
    version then the topics as an int32-counted array of int16-length strings); None when the
    bytes are not one."""
    try:
        if len(metadata) < 6:
            return None
        (count,) = struct.unpack_from(">i", metadata, 2)
        pos, topics = 6, []
        if count < 0 or count > len(metadata):
            return None
        for _ in range(count):
            (size,) = struct.unpack_from(">h", metadata, pos)
            if size < 0 or pos + 2 + size > len(metadata):
                return None
            topics.append(metadata[pos + 2 : pos + 2 + size].decode())
            pos += 2 + size
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


def _commit_time(commit_timestamp_ms: int) -> int:
    return commit_timestamp_ms


def offsets_of(shard: GroupCoordinatorShard) -> OffsetMetadataManager:
    """The shard's offsets (the broker's group shards are made with them: offsets_install)."""
    offsets = shard.offsets
    if not isinstance(offsets, OffsetMetadataManager):
        raise TypeError(f"__consumer_offsets-{shard.partition}'s shard keeps no offsets")
    return offsets


def offsets_group(shard: GroupCoordinatorShard, group_id: str) -> OffsetsGroup:
    """The group's offset checks: a group that has its own (a KIP-848 consumer group), a
    classic group read through its attributes, or a group nobody joined (known by its offsets
    or not at all)."""
    group = shard.groups.group_or_none(group_id)
    if group is None:
        return SimpleGroup(exists=offsets_of(shard).has_offsets(group_id))
    if isinstance(group, OffsetsGroup):
        return group
    return ClassicOffsets(cast(ClassicGroupView, group))
