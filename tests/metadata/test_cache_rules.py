"""MetadataCache.update_metadata follows Kafka's ZkMetadataCache rules, per request version."""

from __future__ import annotations

import logging
import uuid

import pytest

from kmeta.metadata import (
    Broker,
    Endpoint,
    MetadataCache,
    Node,
    PartitionState,
    TopicPartition,
)
from tests.metadata.umr import B, P, umr

ALL_VERSIONS = range(9)
# One representative per wire family: v0 (single host/port), v1-2 (no listener names),
# v3-4 (ungrouped partitions, listeners), v5-6 (grouped, no ids), v7 (ids), v8 (KIP-866).
FAMILIES = [0, 2, 4, 6, 7, 8]
BROKERS = [B.plain(1, "r1"), B.plain(2, "r2"), B.plain(3, None)]


def fresh(broker_id: int = 1) -> MetadataCache:
    return MetadataCache(broker_id, cluster_id="cluster-a")


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_adds_partitions_with_every_field(version: int) -> None:
    cache = fresh()
    parts = [
        P(
            "orders",
            0,
            leader=1,
            replicas=(1, 2, 3),
            isr=(1, 2),
            offline=(3,),
            leader_epoch=7,
            zk_version=9,
        ),
        P("orders", 1, leader=2, replicas=(2, 3, 1)),
        P("audit", 0, leader=3, replicas=(3,)),
    ]
    deleted = cache.update_metadata(5, umr(version, parts, BROKERS, controller_epoch=4))

    assert deleted == []
    assert cache.contains("orders")
    assert cache.contains(TopicPartition("orders", 1))
    assert cache.contains_partition(TopicPartition("audit", 0))
    assert not cache.contains("missing")
    assert not cache.contains(TopicPartition("orders", 2))
    # offline replicas exist on the wire from v4 only
    offline = (3,) if version >= 4 else ()
    assert cache.get_partition_info("orders", 0) == PartitionState(
        "orders", 0, 4, 1, 7, (1, 2), 9, (1, 2, 3), offline
    )
    assert cache.get_partition_info("orders", 5) is None
    assert cache.get_partition_info("nope", 0) is None
    assert set(cache.get_all_topics()) == {"orders", "audit"}
    assert set(cache.get_all_partitions()) == {
        TopicPartition("orders", 0),
        TopicPartition("orders", 1),
        TopicPartition("audit", 0),
    }
    snap = cache.snapshot
    assert snap.version == 1
    assert snap.cluster_id == "cluster-a"
    assert snap.topic_names_sorted == ("audit", "orders")
    assert snap.partition_count("orders") == 2
    assert snap.partition_count("missing") == 0
    assert cache.get_controller_id() == 1


def test_v0_broker_is_one_plaintext_endpoint() -> None:
    cache = fresh()
    cache.update_metadata(1, umr(0, [], [B(1, (("ignored", "h1", 9092, 5),), rack="r")]))
    assert cache.get_alive_brokers() == (Broker(1, (Endpoint("PLAINTEXT", "h1", 9092, 0),), None),)
    assert cache.get_alive_broker_node(1, "PLAINTEXT") == Node(1, "h1", 9092, None)


@pytest.mark.parametrize("version", [1, 2])
def test_v1_v2_listener_named_after_security_protocol(version: int) -> None:
    eps = tuple((f"x{sp}", f"h{sp}", 9000 + sp, sp) for sp in range(4))
    cache = fresh()
    cache.update_metadata(1, umr(version, [], [B(1, eps, rack="rack-a")]))
    rack = "rack-a" if version >= 2 else None  # rack is on the wire from v2
    (broker,) = cache.get_alive_brokers()
    assert broker == Broker(
        1,
        (
            Endpoint("PLAINTEXT", "h0", 9000, 0),
            Endpoint("SSL", "h1", 9001, 1),
            Endpoint("SASL_PLAINTEXT", "h2", 9002, 2),
            Endpoint("SASL_SSL", "h3", 9003, 3),
        ),
        rack,
    )
    assert broker.endpoint("SSL") == Endpoint("SSL", "h1", 9001, 1)
    assert broker.endpoint("x1") is None
    assert cache.get_alive_broker_node(1, "SASL_SSL") == Node(1, "h3", 9003, rack)


@pytest.mark.parametrize("version", [3, 5, 7, 8])
def test_v3_plus_listener_names_and_nullable_rack(version: int) -> None:
    cache = fresh()
    brokers = [
        B(1, (("CLIENT", "a", 1, 0), ("CONTROL", "b", 2, 1)), rack=None),
        B(2, (("CLIENT", "c", 3, 0),), "r"),
    ]
    cache.update_metadata(1, umr(version, [], brokers))
    assert cache.get_alive_broker_node(1, "CONTROL") == Node(1, "b", 2, None)
    assert cache.get_alive_broker_node(2, "CLIENT") == Node(2, "c", 3, "r")
    assert cache.get_alive_broker_node(2, "CONTROL") is None
    assert cache.get_alive_broker_node(9, "CLIENT") is None
    assert cache.get_alive_broker_nodes("CLIENT") == [Node(1, "a", 1, None), Node(2, "c", 3, "r")]
    assert cache.snapshot.alive_brokers[1].node("CONTROL") == Node(1, "b", 2, None)


@pytest.mark.parametrize("version", FAMILIES)
def test_live_brokers_replaced_wholesale(version: int) -> None:
    cache = fresh()
    cache.update_metadata(1, umr(version, [P("t", 0)], BROKERS))
    cache.update_metadata(2, umr(version, [], [B.plain(4)]))
    assert [b.id for b in cache.get_alive_brokers()] == [4]
    assert set(cache.snapshot.alive_nodes) == {4}
    assert cache.get_alive_broker_node(1, "PLAINTEXT") is None


@pytest.mark.parametrize("version", FAMILIES)
def test_update_without_partitions_keeps_partition_states(version: int) -> None:
    cache = fresh()
    tid = uuid.uuid4()
    cache.update_metadata(1, umr(version, [P("t", 0), P("u", 0)], BROKERS, topic_ids={"t": tid}))
    before = cache.snapshot
    new_id = uuid.uuid4()
    cache.update_metadata(
        2,
        umr(
            version, [], [B.plain(2)], controller_id=2, topic_ids={"u": new_id}, extra_topics=["u"]
        ),
    )
    after = cache.snapshot
    assert after.partition_states is before.partition_states  # not even copied
    assert after.version == before.version + 1
    assert cache.get_controller_id() == 2
    assert list(after.alive_brokers) == [2]
    if version >= 7:  # topic ids still move with an update that has no partition states
        assert after.topic_ids == {"t": tid, "u": new_id}
    elif version >= 5:
        assert after.topic_ids == {}
    else:
        assert after.topic_ids is before.topic_ids


@pytest.mark.parametrize("version", FAMILIES)
def test_leader_during_delete_removes_partition_then_topic(version: int) -> None:
    cache = fresh()
    tid = uuid.uuid4()
    cache.update_metadata(
        1, umr(version, [P("t", 0), P("t", 1), P("keep", 0)], BROKERS, topic_ids={"t": tid})
    )

    deleted = cache.update_metadata(
        2, umr(version, [P("t", 1, leader=-2)], BROKERS, topic_ids={"t": tid})
    )
    assert deleted == [TopicPartition("t", 1)]
    assert cache.contains("t")
    assert not cache.contains(TopicPartition("t", 1))
    assert cache.snapshot.partition_count("t") == 1
    assert cache.get_topic_id("t") == (tid if version >= 7 else None)

    deleted = cache.update_metadata(
        3, umr(version, [P("t", 0, leader=-2)], BROKERS, topic_ids={"t": tid})
    )
    assert deleted == [TopicPartition("t", 0)]
    assert not cache.contains("t")  # the topic went with its last partition...
    assert cache.get_topic_id("t") is None  # ...and so did its id
    assert "t" not in cache.snapshot.topic_ids
    assert set(cache.get_all_topics()) == {"keep"}
    assert cache.snapshot.topic_names_sorted == ("keep",)


@pytest.mark.parametrize("version", FAMILIES)
def test_deleted_partitions_are_those_sent_with_leader_minus_two(version: int) -> None:
    cache = fresh()
    cache.update_metadata(1, umr(version, [P("t", 0), P("t", 1)], BROKERS))
    req = umr(
        version,
        [
            P("t", 0, leader=-2),
            P("ghost", 3, leader=-2),  # unknown: still reported, as Kafka does
            P("t", 1, leader=-2),
            P("t", 1, leader=2),  # re-added later in the same request: not deleted
        ],
        BROKERS,
    )
    deleted = cache.update_metadata(2, req)
    assert deleted == [TopicPartition("t", 0), TopicPartition("ghost", 3)]
    assert cache.get_partition_info("t", 1) is not None
    assert cache.get_partition_info("t", 1).leader == 2  # type: ignore[union-attr]
    assert not cache.contains("ghost")


@pytest.mark.parametrize("version", FAMILIES)
def test_other_states_added_or_replaced(version: int) -> None:
    cache = fresh()
    cache.update_metadata(1, umr(version, [P("t", 0, leader=1, leader_epoch=1)], BROKERS))
    cache.update_metadata(
        2, umr(version, [P("t", 0, leader=2, leader_epoch=2, isr=(2,)), P("t", 1)], BROKERS)
    )
    state = cache.get_partition_info("t", 0)
    assert state is not None
    assert (state.leader, state.leader_epoch, state.isr) == (2, 2, (2,))
    assert cache.snapshot.partition_count("t") == 2
    # a leader that is not a live broker (-1, offline) is cached as is
    cache.update_metadata(3, umr(version, [P("t", 0, leader=-1)], BROKERS))
    assert cache.get_partition_info("t", 0).leader == -1  # type: ignore[union-attr]


def test_topic_ids_v7_set_and_zero_removes() -> None:
    cache = fresh()
    a, b = uuid.uuid4(), uuid.uuid4()
    cache.update_metadata(1, umr(7, [P("a", 0), P("b", 0)], BROKERS, topic_ids={"a": a, "b": b}))
    assert cache.snapshot.topic_ids == {"a": a, "b": b}
    # "a" sent with the zero uuid loses its id; "b" not mentioned keeps it
    cache.update_metadata(2, umr(7, [P("a", 0, leader=2)], BROKERS))
    assert cache.snapshot.topic_ids == {"b": b}
    assert cache.snapshot.topic_id("a") is None


def test_v0_to_v4_never_touch_topic_ids() -> None:
    cache = fresh()
    a = uuid.uuid4()
    cache.update_metadata(1, umr(7, [P("a", 0)], BROKERS, topic_ids={"a": a}))
    for version in range(5):
        cache.update_metadata(2, umr(version, [P("a", 0, leader=2)], BROKERS))
        assert cache.get_topic_id("a") == a


def test_v5_v6_clear_ids_of_topics_they_mention() -> None:
    cache = fresh()
    a, b = uuid.uuid4(), uuid.uuid4()
    cache.update_metadata(1, umr(7, [P("a", 0), P("b", 0)], BROKERS, topic_ids={"a": a, "b": b}))
    cache.update_metadata(2, umr(6, [P("a", 0, leader=2)], BROKERS))
    assert cache.snapshot.topic_ids == {"b": b}


def test_full_update_replaces_whole_partition_set() -> None:
    cache = fresh()
    ids = {t: uuid.uuid4() for t in "abc"}
    cache.update_metadata(
        1,
        umr(8, [P("a", 0), P("a", 1), P("b", 0), P("c", 0), P("c", 1)], BROKERS, topic_ids=ids),
    )
    deleted = cache.update_metadata(
        2,
        umr(8, [P("a", 0, leader=3), P("c", 1), P("d", 0)], BROKERS, topic_ids=ids, type_=2),
    )
    assert sorted(deleted) == [
        TopicPartition("a", 1),
        TopicPartition("b", 0),
        TopicPartition("c", 0),
    ]
    snap = cache.snapshot
    assert {t: sorted(p) for t, p in snap.partition_states.items()} == {
        "a": [0],
        "c": [1],
        "d": [0],
    }
    assert snap.partition("a", 0).leader == 3  # type: ignore[union-attr]
    assert "b" not in snap.topic_ids
    assert snap.topic_ids["a"] == ids["a"]
    assert snap.topic_names_sorted == ("a", "c", "d")


def test_full_update_without_partitions_empties_the_cache() -> None:
    cache = fresh()
    cache.update_metadata(1, umr(8, [P("a", 0), P("b", 0)], BROKERS))
    deleted = cache.update_metadata(2, umr(8, [], BROKERS, type_=2))
    assert sorted(deleted) == [TopicPartition("a", 0), TopicPartition("b", 0)]
    assert len(cache.snapshot.partition_states) == 0
    assert cache.snapshot.topic_names_sorted == ()


@pytest.mark.parametrize("type_", [0, 1])
def test_v8_incremental_and_unknown_types_are_incremental(type_: int) -> None:
    cache = fresh()
    cache.update_metadata(1, umr(8, [P("a", 0), P("b", 0)], BROKERS))
    deleted = cache.update_metadata(2, umr(8, [P("a", 0, leader=2)], BROKERS, type_=type_))
    assert deleted == []
    assert set(cache.get_all_topics()) == {"a", "b"}


def test_controller_id() -> None:
    cache = fresh()
    cache.update_metadata(1, umr(8, [], BROKERS, controller_id=-1))
    assert cache.get_controller_id() is None
    cache.update_metadata(2, umr(8, [], BROKERS, controller_id=2))
    assert cache.get_controller_id() == 2
    assert cache.snapshot.kraft_controller_id is None
    # KIP-866: a KRaft controller is not a broker; clients are pointed at a live broker
    cache.update_metadata(3, umr(8, [], [B.plain(3), B.plain(2)], controller_id=3000, kraft=True))
    assert cache.snapshot.kraft_controller_id == 3000
    assert cache.get_controller_id() == 2
    cache.update_metadata(4, umr(8, [], [], controller_id=3000, kraft=True))
    assert cache.get_controller_id() is None


def test_replica_endpoints_only_live_replicas_with_the_listener() -> None:
    cache = fresh()
    brokers = [B.plain(1, None, "PLAINTEXT", "CONTROL"), B.plain(2, None, "CONTROL")]
    cache.update_metadata(1, umr(7, [P("t", 0, replicas=(1, 2, 3))], brokers))
    tp = TopicPartition("t", 0)
    assert cache.get_partition_replica_endpoints(tp, "CONTROL") == {
        1: Node(1, "b1.local", 9101, None),
        2: Node(2, "b2.local", 9002, None),
    }
    assert cache.get_partition_replica_endpoints(tp, "PLAINTEXT") == {
        1: Node(1, "b1.local", 9001, None)
    }
    assert cache.get_partition_replica_endpoints(TopicPartition("t", 9), "PLAINTEXT") == {}


def test_listener_mismatch_logged_as_error(caplog: pytest.LogCaptureFixture) -> None:
    cache = fresh(broker_id=1)
    same = [B.plain(1, None, "PLAINTEXT", "CONTROL"), B.plain(2, None, "PLAINTEXT", "CONTROL")]
    with caplog.at_level(logging.ERROR, logger="kmeta.metadata"):
        cache.update_metadata(1, umr(7, [], same))
        assert caplog.records == []
        # Kafka compares against this broker's listeners, only when this broker is alive
        cache.update_metadata(2, umr(7, [], [B.plain(2), B.plain(3, None, "OTHER")]))
        assert caplog.records == []
        cache.update_metadata(3, umr(7, [], [same[0], B.plain(2)]))
    (record,) = caplog.records
    assert record.name == "kmeta.metadata"
    assert record.levelno == logging.ERROR
    assert "Listeners are not identical across brokers" in record.getMessage()
    assert cache.snapshot.version == 3  # logged, still applied


def test_version_rises_with_every_applied_update() -> None:
    cache = fresh()
    assert cache.snapshot.version == 0
    for i, version in enumerate(ALL_VERSIONS, start=1):
        cache.update_metadata(i, umr(version, [P("t", 0)] if i % 2 else [], BROKERS))
        assert cache.snapshot.version == i


def test_cluster_id_kept_across_updates() -> None:
    cache = MetadataCache(1)
    assert cache.snapshot.cluster_id is None
    cache = fresh()
    cache.update_metadata(1, umr(8, [P("t", 0)], BROKERS))
    assert cache.snapshot.cluster_id == "cluster-a"
