"""The offset APIs' group checks (Kafka's ClassicGroup.validateOffsetCommit and friends) on
classic groups in each state, and on groups nobody joined."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import pytest

from kmeta.protocol.errors import ErrorCode as E
from kmeta.server.group.offsets.offsets_groups import ClassicOffsets, SimpleGroup


def subscription(*topics: str, version: int = 1) -> bytes:
    """A ConsumerProtocolSubscription as Kafka's consumers write it (user data empty)."""
    body = struct.pack(">hi", version, len(topics)) + b"".join(struct.pack(">h", len(t)) + t.encode() for t in topics)
    return body + struct.pack(">i", -1) + (struct.pack(">i", 0) if version >= 1 else b"")


@dataclass
class Member:
    instance_id: str | None
    subscription: bytes = field(default_factory=lambda: subscription("t"))

    def metadata(self, protocol: str | None) -> bytes:
        return self.subscription if protocol == "range" else b""


@dataclass
class Group:
    """A classic group's attributes, as ClassicGroupView reads them (groups' ClassicGroup)."""

    state_name: str = "Stable"
    generation_id: int = 3
    protocol_type: str | None = "consumer"
    protocol_name: str | None = "range"
    current_state_timestamp_ms: int = 500
    members: dict[str, Member] = field(default_factory=lambda: {"m1": Member(None), "m2": Member("i2")})

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def static_member_id(self, group_instance_id: str) -> str | None:
        return next((m for m, x in self.members.items() if x.instance_id == group_instance_id), None)


@pytest.mark.parametrize(
    ("state", "member", "instance", "generation", "txn", "error"),
    [
        ("Stable", "m1", None, 3, False, E.NONE),
        ("Stable", "m1", None, 2, False, E.ILLEGAL_GENERATION),
        ("Stable", "mx", None, 3, False, E.UNKNOWN_MEMBER_ID),
        ("Stable", "m1", "i2", 3, False, E.FENCED_INSTANCE_ID),
        ("Stable", "m2", "i9", 3, False, E.UNKNOWN_MEMBER_ID),
        ("Stable", "m2", "i2", 3, False, E.NONE),
        ("Stable", "", None, -1, False, E.UNKNOWN_MEMBER_ID),  # (v0-style commit into a live group)
        ("Stable", "", None, -1, True, E.NONE),
        ("Empty", "", None, -1, False, E.NONE),
        ("Empty", "gone", None, -1, False, E.NONE),
        ("CompletingRebalance", "m1", None, 3, False, E.REBALANCE_IN_PROGRESS),
        ("CompletingRebalance", "m1", None, 3, True, E.NONE),
        ("PreparingRebalance", "m1", None, 3, False, E.NONE),
        ("Dead", "m1", None, 3, False, E.COORDINATOR_NOT_AVAILABLE),
    ],
)
def test_classic_commit_checks(state: str, member: str, instance: str | None, generation: int, txn: bool, error: E) -> None:
    assert ClassicOffsets(Group(state_name=state)).validate_offset_commit(member, instance, generation, txn, 8) == error


def test_classic_delete_fetch_and_subscription() -> None:
    assert ClassicOffsets(Group()).validate_offset_delete() == E.NONE  # (consumer protocol: per topic)
    assert ClassicOffsets(Group(protocol_type="connect")).validate_offset_delete() == E.NON_EMPTY_GROUP
    assert ClassicOffsets(Group(state_name="Empty", protocol_type="connect")).validate_offset_delete() == E.NONE
    assert ClassicOffsets(Group(state_name="Dead")).validate_offset_delete() == E.GROUP_ID_NOT_FOUND
    assert ClassicOffsets(Group(state_name="Dead")).validate_offset_fetch(None, -1) == E.GROUP_ID_NOT_FOUND
    group = ClassicOffsets(Group())
    assert group.is_subscribed_to_topic("t")
    assert not group.is_subscribed_to_topic("u")
    assert ClassicOffsets(Group(protocol_name=None)).is_subscribed_to_topic("u")  # (consumer, not yet known)
    assert not ClassicOffsets(Group(protocol_type="connect")).is_subscribed_to_topic("t")
    two = Group(members={"a": Member(None, subscription("x", "y", version=0)), "b": Member(None, subscription("z", version=3))})
    assert ClassicOffsets(two).subscribed_topics() == {"x", "y", "z"}
    assert ClassicOffsets(Group(members={"a": Member(None, b"\x00\x01\x00\x00\x00\x09")})).subscribed_topics() is None
    assert ClassicOffsets(Group(members={})).subscribed_topics() == frozenset()


def test_classic_expiration_base() -> None:
    empty = ClassicOffsets(Group(state_name="Empty")).offset_expiration_base()
    assert empty is not None
    assert empty(10) == 500
    old_record = ClassicOffsets(Group(state_name="Empty", current_state_timestamp_ms=-1)).offset_expiration_base()
    assert old_record is not None
    assert old_record(10) == 10
    stable = ClassicOffsets(Group()).offset_expiration_base()
    assert stable is not None
    assert stable(10) == 10
    assert ClassicOffsets(Group(state_name="PreparingRebalance")).offset_expiration_base() is None
    assert ClassicOffsets(Group(protocol_type="connect")).offset_expiration_base() is None
    simple = ClassicOffsets(Group(protocol_type=None, state_name="Empty")).offset_expiration_base()
    assert simple is not None
    assert simple(10) == 10


def test_groups_nobody_joined() -> None:
    unknown, known = SimpleGroup(exists=False), SimpleGroup(exists=True)
    assert unknown.validate_offset_commit("", None, -1, False, 9) == E.NONE
    assert unknown.validate_offset_commit("m", None, 1, False, 9) == E.GROUP_ID_NOT_FOUND
    assert unknown.validate_offset_commit("m", None, 1, False, 8) == E.ILLEGAL_GENERATION
    assert unknown.validate_offset_commit("m", None, 1, True, 4) == E.ILLEGAL_GENERATION
    assert known.validate_offset_commit("m", None, 1, False, 9) == E.UNKNOWN_MEMBER_ID
    assert known.validate_offset_commit("", None, -1, False, 9) == E.NONE
    assert unknown.validate_offset_delete() == E.GROUP_ID_NOT_FOUND
    assert known.validate_offset_delete() == E.NONE
    base = known.offset_expiration_base()
    assert base is not None
    assert base(7) == 7
