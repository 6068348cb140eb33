"""KIP-848 consumer groups decided and replayed as the coordinator does (consumer_harness):
epochs, reconciliation without double ownership, metadata-driven rebalances, Kafka's errors."""

from __future__ import annotations

import uuid
from typing import Any

from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import consumer_group_heartbeat as cgh
from kmeta.server.group.classic.classic import ClassicGroup, GroupState
from kmeta.server.group.consumer import consumer_records as rec
from kmeta.server.group.consumer.consumer_group import STABLE, ConsumerGroup
from kmeta.server.group.consumer.consumer_manager import ConsumerGroupManager
from kmeta.server.group.consumer.consumer_member import MemberState
from kmeta.server.group.records import group_metadata_key
from tests.server.group.consumer_harness import (
    Cluster,
    Consumer,
    Coordinator,
    converge,
    owners,
    partitions_of,
)


def setup(partitions: int = 6, **config: Any) -> tuple[Cluster, Coordinator]:
    cluster = Cluster()
    cluster.set_topic("t", partitions)
    return cluster, Coordinator(cluster, **config)


def test_three_members_share_six_partitions_each_once() -> None:
    cluster, coord = setup()
    members = [Consumer(coord, ["t"]) for _ in range(3)]
    converge(members)
    assert set(owners(members)) == partitions_of(cluster, {"t": 6})
    assert sorted(len(m.owned[cluster.ids["t"]]) for m in members) == [2, 2, 2]
    group = coord.manager.groups["g"]
    assert group.state == STABLE
    assert group.group_epoch == group.assignment_epoch == 3
    assert {m.epoch for m in members} == {3}
    assert members[0].last is not None
    assert members[0].last.heartbeat_interval_ms == 5000


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    cluster, coord = setup()
    a = Consumer(coord, ["t"])
    converge([a])
    b = Consumer(coord, ["t"])
    b.heartbeat()  # joins: the target gives it three of a's partitions, all unreleased
    assert b.owned == {}
    assert coord.manager.groups["g"].members[b.member_id].state is MemberState.UNRELEASED_PARTITIONS
    a.heartbeat()  # told to revoke; still owns them
    member_a = coord.manager.groups["g"].members[a.member_id]
    assert member_a.state is MemberState.UNREVOKED_PARTITIONS
    assert len(member_a.partitions_pending_revocation[cluster.ids["t"]]) == 3
    b.heartbeat()  # a has not confirmed: b still waits
    assert b.owned == {}
    a.heartbeat()  # a reports it gave them up
    b.heartbeat()
    assert len(b.owned[cluster.ids["t"]]) == 3
    assert set(owners([a, b])) == partitions_of(cluster, {"t": 6})


def test_a_leaving_member_partitions_move_to_the_others() -> None:
    cluster, coord = setup()
    members = [Consumer(coord, ["t"]) for _ in range(3)]
    converge(members)
    r = members[2].leave()
    assert r.error_code == 0
    assert r.member_epoch == -1
    assert members[2].member_id not in coord.manager.groups["g"].members
    converge(members[:2])
    assert set(owners(members[:2])) == partitions_of(cluster, {"t": 6})


def test_partitions_added_are_assigned_after_a_metadata_refresh() -> None:
    cluster, coord = setup()
    members = [Consumer(coord, ["t"]) for _ in range(3)]
    converge(members)
    epoch = coord.manager.groups["g"].group_epoch
    cluster.set_topic("t", 9)
    assert coord.manager.stale_groups(cluster.snap, ["t"]) == ["g"]
    assert coord.manager.stale_groups(cluster.snap, ["other"]) == []
    coord.apply(coord.manager.refresh("g", cluster.snap))
    group = coord.manager.groups["g"]
    assert group.group_epoch == group.assignment_epoch == epoch + 1
    assert group.subscription_metadata["t"].num_partitions == 9
    assert coord.manager.refresh("g", cluster.snap) is None  # nothing left to do
    converge(members)
    assert set(owners(members)) == partitions_of(cluster, {"t": 9})


def test_a_heartbeat_notices_new_partitions_without_the_hook() -> None:
    cluster, coord = setup()
    members = [Consumer(coord, ["t"]) for _ in range(2)]
    converge(members)
    cluster.set_topic("t", 8)
    converge(members)
    assert set(owners(members)) == partitions_of(cluster, {"t": 8})


def test_topic_deleted_then_created_under_a_subscription() -> None:
    cluster, coord = setup()
    members = [Consumer(coord, ["t", "later"]) for _ in range(2)]
    converge(members)
    cluster.set_topic("later", 2)
    converge(members)
    assert set(owners(members)) == partitions_of(cluster, {"t": 6, "later": 2})
    cluster.delete_topic("t")
    converge(members)
    assert set(owners(members)) == partitions_of(cluster, {"later": 2})


def test_session_and_rebalance_timeouts_fence_the_member() -> None:
    cluster, coord = setup()
    a, b = Consumer(coord, ["t"]), Consumer(coord, ["t"])
    converge([a, b])
    coord.apply(coord.manager.expire("g", b.member_id, cluster.snap))
    assert b.member_id not in coord.manager.groups["g"].members
    converge([a])
    assert set(owners([a])) == partitions_of(cluster, {"t": 6})
    c = Consumer(coord, ["t"])
    c.heartbeat()
    a.heartbeat()  # must revoke three; never does
    member_a = coord.manager.groups["g"].members[a.member_id]
    assert member_a.state is MemberState.UNREVOKED_PARTITIONS
    assert coord.manager.expire("g", a.member_id, cluster.snap, revoking_epoch=member_a.member_epoch - 1) is None
    coord.apply(coord.manager.expire("g", a.member_id, cluster.snap, revoking_epoch=member_a.member_epoch))
    assert a.member_id not in coord.manager.groups["g"].members
    converge([c])
    assert set(owners([c])) == partitions_of(cluster, {"t": 6})


def test_kafkas_errors() -> None:
    _cluster, coord = setup(max_size=2)
    a = Consumer(coord, ["t"])
    converge([a])
    cases = [
        ({"member_id": "nobody", "member_epoch": 1}, ErrorCode.UNKNOWN_MEMBER_ID),
        ({"member_id": a.member_id, "member_epoch": a.epoch + 1}, ErrorCode.FENCED_MEMBER_EPOCH),
        ({"member_id": a.member_id, "member_epoch": 0, "rebalance_timeout_ms": 1, "subscribed_topic_names": ["t"], "topic_partitions": (), "server_assignor": "sticky"}, ErrorCode.UNSUPPORTED_ASSIGNOR),
        ({"member_id": "x", "member_epoch": 0, "subscribed_topic_names": ["t"], "topic_partitions": ()}, ErrorCode.INVALID_REQUEST),
        ({"member_id": "x", "member_epoch": 0, "rebalance_timeout_ms": 1, "topic_partitions": ()}, ErrorCode.INVALID_REQUEST),
        ({"member_id": "x", "member_epoch": 0, "rebalance_timeout_ms": 1, "subscribed_topic_names": ["t"]}, ErrorCode.INVALID_REQUEST),
        ({"member_id": "", "member_epoch": 3}, ErrorCode.INVALID_REQUEST),
        ({"member_id": "x", "member_epoch": -3}, ErrorCode.INVALID_REQUEST),
        ({"group_id": "nope", "member_id": "x", "member_epoch": 2}, ErrorCode.GROUP_ID_NOT_FOUND),
        ({"group_id": " ", "member_id": "x", "member_epoch": 2}, ErrorCode.INVALID_REQUEST),
    ]
    for fields, code in cases:
        r = coord.heartbeat(**fields)
        assert r.error_code == code, (fields, r)
        assert r.error_message
    nothing = Consumer(coord, [])  # a subscription to no topic is one (Kafka 4)
    assert nothing.heartbeat().error_code == ErrorCode.NONE
    assert nothing.owned == {}
    third = Consumer(coord, ["t"])
    assert third.heartbeat().error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    # the previous epoch is accepted when the member owns a subset of its assignment (a lost
    # response), any other older one is fenced
    converge([a])
    member = coord.manager.groups["g"].members[a.member_id]
    assert 0 < member.previous_member_epoch < member.member_epoch
    stale = coord.heartbeat(member_id=a.member_id, member_epoch=member.previous_member_epoch, topic_partitions=())
    assert stale.error_code == 0
    assert stale.member_epoch == member.member_epoch
    not_mine = (cgh.TopicPartitions(uuid.uuid4(), (0,)),)
    older = coord.heartbeat(member_id=a.member_id, member_epoch=member.previous_member_epoch, topic_partitions=not_mine)
    assert older.error_code == ErrorCode.FENCED_MEMBER_EPOCH


def test_static_member_leaves_and_its_next_incarnation_keeps_its_partitions() -> None:
    cluster, coord = setup()
    a = Consumer(coord, ["t"], instance_id="i-a")
    b = Consumer(coord, ["t"], instance_id="i-b")
    converge([a, b])
    kept = a.owned
    r = coord.heartbeat(member_id=a.member_id, member_epoch=-2, instance_id="i-a")
    assert r.error_code == 0
    assert r.member_epoch == -2
    taken = Consumer(coord, ["t"], instance_id="i-b")
    assert taken.heartbeat().error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    again = Consumer(coord, ["t"], instance_id="i-a")
    again.heartbeat()
    assert again.member_id != a.member_id
    assert again.owned == kept
    assert a.member_id not in coord.manager.groups["g"].members
    converge([again, b])
    assert set(owners([again, b])) == partitions_of(cluster, {"t": 6})


def test_a_new_leader_rebuilds_the_same_groups_from_the_records() -> None:
    _cluster, coord = setup()
    members = [Consumer(coord, ["t"]) for _ in range(3)]
    converge(members)
    members[0].leave()
    reloaded = ConsumerGroupManager()
    for key, value in coord.written:
        assert rec.key_version(key) in rec.KEY_VERSIONS
        reloaded.replay(key, value)
    a, b = coord.manager.groups["g"], reloaded.groups["g"]
    assert (a.group_epoch, a.assignment_epoch, a.members, a.target_assignment, a.subscription_metadata, a.partition_epochs) == (
        b.group_epoch, b.assignment_epoch, b.members, b.target_assignment, b.subscription_metadata, b.partition_epochs)


def test_describe() -> None:
    cluster, coord = setup()
    members = [Consumer(coord, ["t"]) for _ in range(2)]
    converge(members)
    described = coord.manager.describe("g", cluster.snap)
    assert (described.error_code, described.group_state, described.assignor_name) == (0, "Stable", "uniform")
    assert sorted(len(m.assignment.topic_partitions[0].partitions) for m in described.members if m.assignment) == [3, 3]
    assert {tp.topic_name for m in described.members if m.assignment for tp in m.assignment.topic_partitions} == {"t"}
    missing = coord.manager.describe("nope", cluster.snap)
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_offset_commits_are_checked_against_member_epochs() -> None:
    _cluster, coord = setup()
    a = Consumer(coord, ["t"])
    converge([a])
    group = coord.manager.groups["g"]
    assert group.validate_offset_commit(a.member_id, None, a.epoch, False, 9) == ErrorCode.NONE
    assert group.validate_offset_commit(a.member_id, None, a.epoch - 1, False, 9) == ErrorCode.STALE_MEMBER_EPOCH
    assert group.validate_offset_commit(a.member_id, None, a.epoch, False, 8) == ErrorCode.UNSUPPORTED_VERSION
    assert group.validate_offset_commit("other", None, a.epoch, False, 9) == ErrorCode.UNKNOWN_MEMBER_ID
    assert group.validate_offset_commit("", None, -1, False, 9) == ErrorCode.UNKNOWN_MEMBER_ID  # not empty
    assert group.validate_offset_fetch(None, -1) == ErrorCode.NONE
    assert group.validate_offset_fetch(a.member_id, a.epoch + 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert group.is_subscribed_to_topic("t")
    assert not group.is_subscribed_to_topic("u")
    a.leave()
    assert group.validate_offset_commit("", None, -1, False, 2) == ErrorCode.NONE


def test_the_first_offered_assignor_is_the_default_and_others_are_refused() -> None:
    cluster, coord = setup(assignors=("range",))
    a = Consumer(coord, ["t"])
    converge([a])
    assert coord.manager.describe("g", cluster.snap).assignor_name == "range"
    r = coord.heartbeat(member_id="x", member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_names=["t"], topic_partitions=(), server_assignor="uniform")
    assert r.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert r.error_message == "ServerAssignor uniform is not supported. Supported assignors: range."


def test_an_empty_classic_group_gives_its_id_to_a_consumer_group() -> None:
    cluster, coord = setup()
    busy = ClassicGroup("busy", state=GroupState.STABLE, generation_id=3)
    coord.manager.groups["g"] = ClassicGroup("g")  # Empty: its id is free for a consumer group
    coord.manager.groups["busy"] = busy
    coord.manager.groups["dead"] = ClassicGroup("dead", state=GroupState.DEAD)
    r = coord.heartbeat(group_id="busy", member_id="", member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_names=["t"], topic_partitions=())
    assert (r.error_code, r.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group busy is not a consumer group.")
    assert coord.manager.groups["busy"] is busy
    a = Consumer(coord, ["t"])
    converge([a])
    assert isinstance(coord.manager.groups["g"], ConsumerGroup)
    assert coord.written[0] == (group_metadata_key("g"), None)  # (the classic group's tombstone first)
    assert set(owners([a])) == partitions_of(cluster, {"t": 6})
    r = coord.heartbeat(group_id="dead", member_id="", member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_names=["t"], topic_partitions=())
    assert r.error_code == ErrorCode.NONE
    assert coord.manager.describe("busy", cluster.snap).error_message == "Group busy is not a consumer group."
