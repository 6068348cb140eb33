"""The classic group as pure state: transitions, protocol choice, static members, records."""

from __future__ import annotations

import pytest

from kmeta.protocol.errors import ErrorCode
from kmeta.server.group.classic.classic import (
    VALID_PREVIOUS,
    ClassicGroup,
    ClassicGroupMember,
    GroupState,
    IllegalStateTransition,
)
from kmeta.server.group.records import (
    GroupMetadataValue,
    MemberMetadata,
    group_metadata_key,
    group_metadata_value,
    key_version,
    read_group_metadata_key,
    read_group_metadata_value,
)


def member(member_id: str, *protocols: str, instance: str | None = None) -> ClassicGroupMember:
    return ClassicGroupMember(
        member_id=member_id,
        group_instance_id=instance,
        client_id="c",
        client_host="/127.0.0.1",
        rebalance_timeout_ms=30_000,
        session_timeout_ms=10_000,
        protocol_type="consumer",
        protocols=tuple((p, p.encode()) for p in protocols),
    )


@pytest.mark.parametrize("target", list(GroupState))
@pytest.mark.parametrize("source", list(GroupState))
def test_transitions_are_kafkas(source: GroupState, target: GroupState) -> None:
    group = ClassicGroup("g", state=source)
    allowed = {
        (GroupState.EMPTY, GroupState.PREPARING_REBALANCE),
        (GroupState.STABLE, GroupState.PREPARING_REBALANCE),
        (GroupState.COMPLETING_REBALANCE, GroupState.PREPARING_REBALANCE),
        (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE),
        (GroupState.PREPARING_REBALANCE, GroupState.EMPTY),
        (GroupState.COMPLETING_REBALANCE, GroupState.STABLE),
    } | {(s, GroupState.DEAD) for s in GroupState}
    assert (source in VALID_PREVIOUS[target]) == ((source, target) in allowed)
    if (source, target) in allowed:
        group.transition_to(target, 5)
        assert group.state == target
        assert group.current_state_timestamp_ms == 5
    else:
        with pytest.raises(IllegalStateTransition):
            group.transition_to(target)
        assert group.state == source


def test_protocol_selection_by_vote_among_common_protocols() -> None:
    group = ClassicGroup("g")
    group.add(member("a", "range", "roundrobin", "sticky"))
    group.add(member("b", "roundrobin", "range"))
    group.add(member("c", "roundrobin", "range"))
    assert group.candidate_protocols() == {"range", "roundrobin"}
    assert group.select_protocol() == "roundrobin"  # two votes to one
    assert group.leader_id == "a"
    assert group.protocol_type == "consumer"
    assert group.supports_protocols("consumer", [("range", b"")])
    assert not group.supports_protocols("consumer", [("sticky", b"")])  # b and c lack it
    assert not group.supports_protocols("connect", [("range", b"")])
    assert not ClassicGroup("e").supports_protocols("", [("range", b"")])
    assert not ClassicGroup("e").supports_protocols("consumer", [])


def test_next_generation_and_leader_succession() -> None:
    group = ClassicGroup("g", state=GroupState.PREPARING_REBALANCE)
    group.add(member("a", "range"))
    group.add(member("b", "range"))
    group.init_next_generation(7)
    assert (group.generation_id, group.state, group.protocol_name) == (1, GroupState.COMPLETING_REBALANCE, "range")
    assert group.pending_sync == {"a", "b"}
    result = group.join_result("a", with_members=True)
    assert result.leader == "a"
    assert [m[0] for m in result.members] == ["a", "b"]
    assert group.join_result("b", with_members=False).members == ()
    group.remove("a")
    assert group.leader_id == "b"
    assert group.pending_sync == {"b"}
    group.remove("b")
    assert group.leader_id is None
    group.transition_to(GroupState.PREPARING_REBALANCE)
    group.init_next_generation()
    assert (group.generation_id, group.state, group.protocol_name) == (2, GroupState.EMPTY, None)


def test_static_member_replaced_keeps_place_and_leadership() -> None:
    group = ClassicGroup("g")
    group.add(member("s-1", "range", instance="s"))
    group.add(member("d-1", "range"))
    assert group.validate_member("s-1", "s") == ErrorCode.NONE
    assert group.validate_member("other", "s") == ErrorCode.FENCED_INSTANCE_ID
    assert group.validate_member("s-1", "unknown") == ErrorCode.UNKNOWN_MEMBER_ID
    assert group.validate_member("nobody", None) == ErrorCode.UNKNOWN_MEMBER_ID
    group.members["s-1"].assignment = b"mine"
    replaced = group.replace_static_member("s", "s-2")
    assert list(group.members) == ["s-2", "d-1"]
    assert replaced.assignment == b"mine"
    assert group.leader_id == "s-2"
    assert group.static_member_id("s") == "s-2"
    assert group.validate_member("s-1", "s") == ErrorCode.FENCED_INSTANCE_ID


def test_group_round_trips_through_its_record() -> None:
    group = ClassicGroup("g", state=GroupState.PREPARING_REBALANCE)
    group.add(member("a", "range", instance="ia"))
    group.add(member("b", "range"))
    group.init_next_generation(99)
    value = group.to_record({"a": b"A", "b": b"B"})
    key = group_metadata_key("g")
    assert key_version(key) == 2
    assert read_group_metadata_key(key) == "g"
    decoded = read_group_metadata_value(group_metadata_value(value))
    assert decoded == value._replace(members=tuple(decoded.members))
    loaded = ClassicGroup.from_record("g", decoded)
    assert loaded.state == GroupState.STABLE
    assert loaded.generation_id == 1
    assert loaded.leader_id == "a"
    assert loaded.protocol_name == "range"
    assert loaded.static_member_id("ia") == "a"
    assert [(m.member_id, m.assignment, m.metadata("range")) for m in loaded.members.values()] == [
        ("a", b"A", b"range"),
        ("b", b"B", b"range"),
    ]
    empty = ClassicGroup.from_record("g", GroupMetadataValue(3, "consumer", 4, None, None, -1, ()))
    assert empty.state == GroupState.EMPTY
    assert empty.generation_id == 4


def test_record_bytes_are_kafkas_format() -> None:
    """Key: int16 2 + group; value v3: int16 3, type, generation, protocol, leader, timestamp,
    members (id, instance id, client id, host, rebalance timeout, session timeout, subscription,
    assignment): the bytes Kafka's GroupCoordinatorRecordSerde reads."""
    assert group_metadata_key("g") == b"\x00\x02\x00\x01g"
    value = GroupMetadataValue(3, "consumer", 5, "range", "m", 123, (MemberMetadata("m", None, "c", "/h", 300, 100, b"s", b"a"),))
    assert group_metadata_value(value) == (
        b"\x00\x03" + b"\x00\x08consumer" + b"\x00\x00\x00\x05" + b"\x00\x05range" + b"\x00\x01m"
        + (123).to_bytes(8, "big") + b"\x00\x00\x00\x01"
        + b"\x00\x01m" + b"\xff\xff" + b"\x00\x01c" + b"\x00\x02/h" + (300).to_bytes(4, "big")
        + (100).to_bytes(4, "big") + b"\x00\x00\x00\x01s" + b"\x00\x00\x00\x01a"
    )  # fmt: skip
    # versions 0 (no rebalance timeout: the session timeout stands in) and 4 (flexible) read too
    v0 = value._replace(version=0)
    loaded = ClassicGroup.from_record("g", read_group_metadata_value(group_metadata_value(v0)))
    assert loaded.members["m"].rebalance_timeout_ms == 100
    v4 = read_group_metadata_value(group_metadata_value(value._replace(version=4)))
    assert v4.members[0].rebalance_timeout == 300
    assert v4.current_state_timestamp == 123
