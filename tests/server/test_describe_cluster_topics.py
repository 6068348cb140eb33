"""DescribeCluster (60) and DescribeTopicPartitions (75) from the broker's cache, through an
in-memory connection (the real dispatch path)."""

from __future__ import annotations

import uuid

import pytest

from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import describe_cluster as dc
from kmeta.protocol.messages import describe_topic_partitions as dtp
from kmeta.server.handlers.metadata import CLUSTER_OPERATIONS, TOPIC_OPERATIONS
from tests.server.helpers import (
    ConnectionPair,
    broker_state,
    partition,
    serving,
    topic_id,
)

ZERO = uuid.UUID(int=0)
NOT_ASKED = -(2**31)


def _cluster(controller_id: int = 2, big: int = 5) -> tuple[ConnectionPair, ConnectionPair]:
    """Brokers 1-3 alive (3 lacks EXTERNAL, 1 has rack r1); 4 is dead. Topics: ``big`` with
    ``big`` partitions, ``a`` (2), ``dead`` (leader 4), ``on-3`` (leader 3)."""
    topics = {
        "a": [partition(0, 1, (1, 2), leader_epoch=7), partition(1, 2, (2, 1), leader_epoch=8)],
        "big": [partition(p, 1, (1,)) for p in range(big)],
        "dead": [partition(0, 4, (4, 1), isr=(4, 1), leader_epoch=5, offline=(4,))],
        "on-3": [partition(0, 3, (3, 1), leader_epoch=2)],
    }
    return serving(topics, controller_id=controller_id)


# -- DescribeCluster ----------------------------------------------------------------------------
@pytest.mark.parametrize("version", [0, 1])
async def test_describe_cluster_lists_the_listeners_brokers(version: int) -> None:
    plain, external = _cluster()
    resp = plain.request(dc.DescribeClusterRequest(version=version, include_cluster_authorized_operations=False))
    assert (resp.error_code, resp.error_message) == (0, None)
    assert resp.cluster_id == "kmeta-test"
    assert resp.controller_id == 2
    assert [(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers] == [
        (1, "h1", 9001, "r1"), (2, "h2", 9002, None), (3, "h3", 9003, None),
    ]  # fmt: skip
    assert resp.cluster_authorized_operations == NOT_ASKED
    resp = external.request(dc.DescribeClusterRequest(version=version, include_cluster_authorized_operations=True))
    assert [(b.broker_id, b.host, b.port) for b in resp.brokers] == [(1, "x1", 19001), (2, "x2", 19002)]
    assert resp.cluster_authorized_operations == CLUSTER_OPERATIONS
    if version >= 1:
        assert resp.endpoint_type == 1


async def test_describe_cluster_controller_not_listed_is_minus_one() -> None:
    _, external = _cluster(controller_id=3)  # 3 has no EXTERNAL listener
    assert external.request(dc.DescribeClusterRequest(version=1)).controller_id == -1
    plain, _ = _cluster(controller_id=4)  # dead
    assert plain.request(dc.DescribeClusterRequest(version=1)).controller_id == -1


async def test_describe_cluster_empty_cache() -> None:
    plain = ConnectionPair(broker_state())
    resp = plain.request(dc.DescribeClusterRequest(version=1))
    assert (resp.error_code, resp.controller_id, resp.brokers, resp.cluster_id) == (0, -1, (), "kmeta-test")


@pytest.mark.parametrize(
    ("endpoint_type", "error", "message"),
    [
        (2, ErrorCode.MISMATCHED_ENDPOINT_TYPE,
         "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"),
        (0, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 0"),
        (7, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 7"),
    ],
)  # fmt: skip
async def test_describe_cluster_endpoint_types(endpoint_type: int, error: ErrorCode, message: str) -> None:
    plain, _ = _cluster()
    resp = plain.request(dc.DescribeClusterRequest(version=1, endpoint_type=endpoint_type))
    assert (resp.error_code, resp.error_message, resp.brokers) == (error, message, ())


# -- DescribeTopicPartitions ----------------------------------------------------------------------
def _dtp(*names: str, limit: int = 2000, cursor: tuple[str, int] | None = None) -> object:
    return dtp.DescribeTopicPartitionsRequest(
        version=0,
        topics=tuple(dtp.TopicRequest(name=n) for n in names),
        response_partition_limit=limit,
        cursor=None if cursor is None else dtp.Cursor(topic_name=cursor[0], partition_index=cursor[1]),
    )


def _shape(resp: object) -> list[tuple[str, int, list[int]]]:
    return [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in resp.topics]  # type: ignore[attr-defined]


def _cursor(resp: object) -> tuple[str, int] | None:
    c = resp.next_cursor  # type: ignore[attr-defined]
    return None if c is None else (c.topic_name, c.partition_index)


async def test_all_topics_in_name_order_with_partition_details() -> None:
    plain, external = _cluster()
    resp = plain.request(_dtp())
    assert _shape(resp) == [("a", 0, [0, 1]), ("big", 0, [0, 1, 2, 3, 4]), ("dead", 0, [0]), ("on-3", 0, [0])]
    assert _cursor(resp) is None
    a, _, dead, on3 = resp.topics
    assert (a.topic_id, a.is_internal) == (topic_id("a"), False)
    assert a.topic_authorized_operations == TOPIC_OPERATIONS
    p1 = a.partitions[1]
    assert (p1.leader_id, p1.leader_epoch, p1.replica_nodes, p1.isr_nodes, p1.offline_replicas) == (2, 8, (2, 1), (2, 1), ())
    assert (p1.eligible_leader_replicas, p1.last_known_elr) == ((), ())
    d0 = dead.partitions[0]
    assert (d0.error_code, d0.leader_id, d0.leader_epoch, d0.replica_nodes, d0.offline_replicas) == (0, -1, 5, (4, 1), (4,))
    assert on3.partitions[0].leader_id == 3
    # on EXTERNAL broker 3 has no endpoint: not the leader there, and offline
    x = external.request(_dtp("on-3")).topics[0].partitions[0]
    assert (x.leader_id, x.replica_nodes, x.offline_replicas) == (-1, (3, 1), (3,))


async def test_explicit_topics_unknown_invalid_and_duplicates() -> None:
    plain, _ = _cluster()
    resp = plain.request(_dtp("on-3", "nope", "a", "a", "bad/name"))
    assert _shape(resp) == [
        ("a", 0, [0, 1]),
        ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION, []),
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []),
        ("on-3", 0, [0]),
    ]
    missing = resp.topics[2]
    assert (missing.topic_id, missing.topic_authorized_operations) == (ZERO, TOPIC_OPERATIONS)


async def test_partition_limit_pages_with_cursor() -> None:
    plain, _ = _cluster()
    seen: list[tuple[str, int]] = []
    cursor: tuple[str, int] | None = None
    pages = 0
    while True:
        resp = plain.request(_dtp(limit=3, cursor=cursor))
        pages += 1
        assert sum(len(t.partitions) for t in resp.topics) <= 3
        seen += [(t.name, p.partition_index) for t in resp.topics for p in t.partitions]
        cursor = _cursor(resp)
        if cursor is None:
            break
    expected = [("a", 0), ("a", 1)] + [("big", p) for p in range(5)] + [("dead", 0), ("on-3", 0)]
    assert seen == expected
    assert pages == 3


async def test_limit_cut_inside_a_topic_and_at_a_topic_boundary() -> None:
    plain, _ = _cluster()
    resp = plain.request(_dtp(limit=4))
    assert _shape(resp) == [("a", 0, [0, 1]), ("big", 0, [0, 1])]
    assert _cursor(resp) == ("big", 2)
    resp = plain.request(_dtp(limit=2))  # "a" fills it exactly: the cursor names the next topic
    assert _shape(resp) == [("a", 0, [0, 1])]
    assert _cursor(resp) == ("big", 0)
    resp = plain.request(_dtp("a", "big", limit=3, cursor=("big", 3)))
    assert _shape(resp) == [("big", 0, [3, 4])]
    assert _cursor(resp) is None


@pytest.mark.parametrize("limit", [0, -5])
async def test_limit_at_least_one(limit: int) -> None:
    plain, _ = _cluster()
    resp = plain.request(_dtp(limit=limit))
    assert _shape(resp) == [("a", 0, [0])]
    assert _cursor(resp) == ("a", 1)


async def test_limit_capped_at_2000() -> None:
    plain, _ = _cluster(big=2500)
    resp = plain.request(_dtp("big", limit=100_000))
    assert len(resp.topics[0].partitions) == 2000
    assert _cursor(resp) == ("big", 2000)


async def test_bad_cursors_are_invalid_requests() -> None:
    plain, _ = _cluster()
    resp = plain.request(_dtp("a", "on-3", cursor=("big", 0)))  # cursor topic not listed
    assert _shape(resp) == [("a", ErrorCode.INVALID_REQUEST, []), ("on-3", ErrorCode.INVALID_REQUEST, [])]
    resp = plain.request(_dtp(cursor=("big", -1)))
    assert (resp.topics, _cursor(resp)) == ((), None)
    resp = plain.request(_dtp("big", cursor=("big", -1)))
    assert _shape(resp) == [("big", ErrorCode.INVALID_REQUEST, [])]


async def test_cursor_past_the_last_partition_and_unknown_cursor_topic() -> None:
    plain, _ = _cluster()
    resp = plain.request(_dtp(cursor=("big", 9)))
    assert _shape(resp) == [("big", 0, []), ("dead", 0, [0]), ("on-3", 0, [0])]
    resp = plain.request(_dtp(cursor=("c", 0)))  # all topics from "c" on
    assert [t.name for t in resp.topics] == ["dead", "on-3"]
