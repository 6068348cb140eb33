"""The offset APIs' group checks (Kafka's ClassicGroup.validateOffsetCommit and friends) on
classic groups in each state, and on groups nobody joined."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from kmeta.protocol.errors import ErrorCode as E
from kmeta.server.group.offsets_groups import ClassicOffsets, SimpleGroup


@dataclass
class Group:
    """A classic group's attributes, as ClassicGroupView reads them."""

    state_name: str = "STABLE"
    generation_id: int = 3
    protocol_type: str | None = "consumer"
    current_state_timestamp_ms: int | None = 500
    members: dict[str, str | None] = field(default_factory=lambda: {"m1": None, "m2": "i2"})
    topics: frozenset[str] | None = frozenset({"t"})

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def static_member_id(self, group_instance_id: str) -> str | None:
        return next((m for m, i in self.members.items() if i == group_instance_id), None)

    def subscribed_topics(self) -> frozenset[str] | None:
        return self.topics


@pytest.mark.parametrize(
    ("state", "member", "instance", "generation", "txn", "error"),
    [
        ("STABLE", "m1", None, 3, False, E.NONE),
        ("STABLE", "m1", None, 2, False, E.ILLEGAL_GENERATION),
        ("STABLE", "mx", None, 3, False, E.UNKNOWN_MEMBER_ID),
        ("STABLE", "m1", "i2", 3, False, E.FENCED_INSTANCE_ID),
        ("STABLE", "m2", "i9", 3, False, E.UNKNOWN_MEMBER_ID),
        ("STABLE", "m2", "i2", 3, False, E.NONE),
        ("STABLE", "", None, -1, False, E.UNKNOWN_MEMBER_ID),  # (v0-style commit into a live group)
        ("STABLE", "", None, -1, True, E.NONE),
        ("EMPTY", "", None, -1, False, E.NONE),
        ("EMPTY", "gone", None, -1, False, E.NONE),
        ("COMPLETING_REBALANCE", "m1", None, 3, False, E.REBALANCE_IN_PROGRESS),
        ("COMPLETING_REBALANCE", "m1", None, 3, True, E.NONE),
        ("PREPARING_REBALANCE", "m1", None, 3, False, E.NONE),
        ("DEAD", "m1", None, 3, False, E.COORDINATOR_NOT_AVAILABLE),
    ],
)
def test_classic_commit_checks(state: str, member: str, instance: str | None, generation: int, txn: bool, error: E) -> None:
    assert ClassicOffsets(Group(state_name=state)).validate_offset_commit(member, instance, generation, txn, 8) == error


def test_classic_delete_fetch_and_subscription() -> None:
    assert ClassicOffsets(Group()).validate_offset_delete() == E.NONE  # (consumer protocol: per topic)
    assert ClassicOffsets(Group(protocol_type="connect")).validate_offset_delete() == E.NON_EMPTY_GROUP
    assert ClassicOffsets(Group(state_name="EMPTY", protocol_type="connect")).validate_offset_delete() == E.NONE
    assert ClassicOffsets(Group(state_name="DEAD")).validate_offset_delete() == E.GROUP_ID_NOT_FOUND
    assert ClassicOffsets(Group(state_name="DEAD")).validate_offset_fetch(None, -1) == E.GROUP_ID_NOT_FOUND
    group = ClassicOffsets(Group())
    assert group.is_subscribed_to_topic("t")
    assert not group.is_subscribed_to_topic("u")
    assert ClassicOffsets(Group(topics=None)).is_subscribed_to_topic("u")  # (consumer, not yet known)
    assert not ClassicOffsets(Group(topics=None, protocol_type="connect")).is_subscribed_to_topic("u")


def test_classic_expiration_base() -> None:
    empty = ClassicOffsets(Group(state_name="EMPTY")).offset_expiration_base()
    assert empty is not None
    assert empty(10) == 500
    old_record = ClassicOffsets(Group(state_name="EMPTY", current_state_timestamp_ms=None)).offset_expiration_base()
    assert old_record is not None
    assert old_record(10) == 10
    stable = ClassicOffsets(Group()).offset_expiration_base()
    assert stable is not None
    assert stable(10) == 10
    assert ClassicOffsets(Group(state_name="PREPARING_REBALANCE")).offset_expiration_base() is None
    assert ClassicOffsets(Group(protocol_type="connect")).offset_expiration_base() is None
    simple = ClassicOffsets(Group(protocol_type=None, state_name="EMPTY")).offset_expiration_base()
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
