"""Consumer-group records in Kafka's byte layout, and RE2/J-compatible topic regexes."""

from __future__ import annotations

import time
import uuid

import pytest

from kmeta.protocol.errors import ErrorCode
from kmeta.server.group.consumer import consumer_records as rec
from kmeta.server.group.consumer.consumer_manager import ConsumerGroupManager
from kmeta.server.group.consumer.consumer_member import ConsumerGroupMember, MemberState
from kmeta.server.group.consumer.consumer_regex import (
    InvalidRegexError,
    compile_regex,
    matching_topics,
)
from tests.server.group.consumer_harness import Cluster, Coordinator


def test_a_key_is_its_version_then_kafkas_non_flexible_strings() -> None:
    assert rec.encode_key(rec.GROUP_METADATA, "g") == b"\x00\x03\x00\x01g"
    assert rec.encode_key(rec.CURRENT_MEMBER_ASSIGNMENT, "g", "m") == b"\x00\x08\x00\x01g\x00\x01m"
    assert rec.decode_key(b"\x00\x05\x00\x01g\x00\x02mm") == (5, "g", "mm")


def test_a_value_is_its_version_then_the_flexible_struct() -> None:
    # epoch 7, then an empty tagged-field section
    assert rec.encode_value(rec.GROUP_METADATA_VALUE, rec.ConsumerGroupMetadataValue(epoch=7)) == b"\x00\x00\x00\x00\x00\x07\x00"


def test_member_records_round_trip() -> None:
    topic = uuid.uuid4()
    member = ConsumerGroupMember(
        "m", member_epoch=4, previous_member_epoch=3, state=MemberState.UNREVOKED_PARTITIONS,
        instance_id="i", rack_id="r", rebalance_timeout_ms=9, client_id="c", client_host="/h",
        subscribed_topic_names=("a", "b"), subscribed_topic_regex="x.*", server_assignor="range",
        assigned_partitions={topic: frozenset({1})}, partitions_pending_revocation={topic: frozenset({2})},
    )
    manager = ConsumerGroupManager()
    metadata = rec.encode_value(rec.MEMBER_METADATA_VALUE, member.metadata_value())
    assignment = rec.encode_value(rec.CURRENT_MEMBER_ASSIGNMENT_VALUE, member.assignment_value())
    manager.replay(rec.encode_key(rec.MEMBER_METADATA, "g", "m"), metadata)
    manager.replay(rec.encode_key(rec.CURRENT_MEMBER_ASSIGNMENT, "g", "m"), assignment)
    assert manager.groups["g"].members["m"] == member
    assert manager.groups["g"].partition_epochs == {topic: {1: 4, 2: 4}}
    manager.replay(rec.encode_key(rec.CURRENT_MEMBER_ASSIGNMENT, "g", "m"), None)
    manager.replay(rec.encode_key(rec.MEMBER_METADATA, "g", "m"), None)
    assert manager.groups["g"].members == {}
    assert manager.groups["g"].partition_epochs == {}
    manager.replay(rec.encode_key(rec.GROUP_METADATA, "g"), None)
    assert "g" not in manager.groups


def test_a_record_that_does_not_decode_is_skipped() -> None:
    manager = ConsumerGroupManager()
    manager.replay(b"\x00\x03\x00\x05g", b"\x00\x00")
    assert manager.groups == {}


@pytest.mark.parametrize("regex", [r"(a)\1", "a(?=b)", "a(?!b)", "(?<=a)b", "(?<!a)b", "(?>a)", "a*+", "a++", "(", "[a"])
def test_what_re2j_refuses_is_refused(regex: str) -> None:
    with pytest.raises(InvalidRegexError):
        compile_regex(regex)
    assert matching_topics(regex, ["a", "ab"]) == set()


def test_the_whole_name_matches_and_internal_topics_never_do() -> None:
    topics = ["orders", "orders-eu", "xorders", "__consumer_offsets"]
    assert matching_topics("orders.*", topics) == {"orders", "orders-eu"}
    assert matching_topics(".*", topics) == {"orders", "orders-eu", "xorders"}
    assert matching_topics(r"orders\z", topics) == {"orders"}
    assert matching_topics(r"\Qorders-eu\E", topics) == {"orders-eu"}  # (RE2/J's quoting)
    assert matching_topics(r"\pL+", topics) == {"orders", "xorders"}  # (RE2/J's classes)


def test_matching_is_linear_whatever_the_expression() -> None:
    # Python's re takes exponential time on this one (it backtracks); RE2 does not
    name = "a" * 249
    started = time.monotonic()
    assert matching_topics("(a+)+b", [name]) == set()
    assert time.monotonic() - started < 1.0


def test_a_regex_member_gets_the_partitions_of_topics_created_later() -> None:
    cluster = Cluster()
    cluster.set_topic("orders-a", 2)
    coord = Coordinator(cluster)
    member = ConsumerGroupMember("m", subscribed_topic_regex="orders-.*", rebalance_timeout_ms=1000)
    coord.manager.replay(rec.encode_key(rec.MEMBER_METADATA, "g", "m"), rec.encode_value(rec.MEMBER_METADATA_VALUE, member.metadata_value()))
    coord.manager.replay(rec.encode_key(rec.CURRENT_MEMBER_ASSIGNMENT, "g", "m"), rec.encode_value(rec.CURRENT_MEMBER_ASSIGNMENT_VALUE, member.assignment_value()))
    assert coord.manager.stale_groups(cluster.snap, ["orders-a"]) == ["g"]
    coord.apply(coord.manager.refresh("g", cluster.snap))
    cluster.set_topic("orders-b", 3)
    cluster.set_topic("other", 3)
    assert coord.manager.stale_groups(cluster.snap, ["orders-b"]) == ["g"]
    coord.apply(coord.manager.refresh("g", cluster.snap))
    group = coord.manager.groups["g"]
    assert set(group.subscription_metadata) == {"orders-a", "orders-b"}
    assert group.target_of("m") == {cluster.ids["orders-a"]: frozenset({0, 1}), cluster.ids["orders-b"]: frozenset({0, 1, 2})}
    r = coord.heartbeat(member_id="m", member_epoch=0, rebalance_timeout_ms=1000, topic_partitions=())
    assert r.error_code == ErrorCode.INVALID_REQUEST  # a join names topics or a regex


def test_v1_joins_with_a_regex_and_a_member_id_of_its_own() -> None:
    cluster = Cluster()
    cluster.set_topic("logs-a", 2)
    cluster.set_topic("metrics", 2)
    coord = Coordinator(cluster)
    join = {"version": 1, "member_epoch": 0, "rebalance_timeout_ms": 1000, "topic_partitions": ()}
    assert coord.heartbeat(member_id="", subscribed_topic_regex="logs-.*", **join).error_code == ErrorCode.INVALID_REQUEST
    bad = coord.heartbeat(member_id="m1", subscribed_topic_regex="logs-(?=x)", **join)
    assert bad.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert bad.error_message
    r = coord.heartbeat(member_id="m1", subscribed_topic_regex="logs-.*", **join)
    assert r.error_code == ErrorCode.NONE
    assert r.member_id == "m1"
    assert r.assignment is not None
    assert {tp.topic_id for tp in r.assignment.topic_partitions} == {cluster.ids["logs-a"]}
    cluster.set_topic("logs-b", 1)
    coord.apply(coord.manager.refresh("g", cluster.snap))
    again = coord.heartbeat(version=1, member_id="m1", member_epoch=r.member_epoch, topic_partitions=r.assignment.topic_partitions)
    assert again.assignment is not None
    assert {tp.topic_id for tp in again.assignment.topic_partitions} == {cluster.ids["logs-a"], cluster.ids["logs-b"]}


def test_an_empty_groups_tombstones_drop_it_on_replay() -> None:
    cluster = Cluster()
    cluster.set_topic("t", 2)
    coord = Coordinator(cluster)
    r = coord.heartbeat(member_id="", member_epoch=0, rebalance_timeout_ms=1000, subscribed_topic_names=["t"], topic_partitions=())
    coord.heartbeat(member_id=r.member_id, member_epoch=-1)
    group = coord.manager.groups["g"]
    assert group.state_name == "Empty"
    for key, value in group.tombstones():
        coord.manager.replay(key, value)
    assert "g" not in coord.manager.groups
