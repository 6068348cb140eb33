"""Cluster: the immutable view and its indexes, built from a Metadata response."""

from __future__ import annotations

import uuid

import pytest

from kmeta.client import Cluster, Node, TopicPartition
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import metadata as m

from .helpers import response


def test_indexes_from_a_response() -> None:
    tid = uuid.uuid4()
    resp = response(
        {
            "orders": [(1, 5, (1, 2)), (2, 3, (2, 3)), (-1, 0, (3,))],
            "__consumer_offsets": [(3, 0, (3,))],
            "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            "bad!": ErrorCode.INVALID_TOPIC_EXCEPTION,
        },
        topic_ids={"orders": tid},
        internal=["__consumer_offsets"],
        controller_id=2,
    )
    c = Cluster.from_response(resp)
    assert [n.id for n in c.nodes] == [1, 2, 3]
    assert c.nodes_by_id[2] == Node(2, "b2", 9002)
    assert c.controller == Node(2, "b2", 9002)
    assert c.cluster_id == "c1"
    assert c.partition_count("orders") == 3
    assert c.partition_count("missing") is None
    assert [p.partition for p in c.available_partitions_by_topic["orders"]] == [0, 1]
    assert c.leader_for(TopicPartition("orders", 1)) == Node(2, "b2", 9002)
    assert c.leader_for(TopicPartition("orders", 2)) is None
    assert [str(p.tp) for p in c.partitions_by_node[3]] == ["__consumer_offsets-0"]
    # Kafka's Cluster.nodeById / partitionsForNode (public API of kmeta.client.Cluster)
    assert c.node_by_id(3) == Node(3, "b3", 9003)
    assert c.node_by_id(9) is None
    assert [str(p.tp) for p in c.partitions_for_node(2)] == ["orders-1"]
    assert c.partitions_for_node(9) == ()
    assert c.partition(TopicPartition("orders", 0)).leader_epoch == 5  # type: ignore[union-attr]
    assert c.topic_ids == {"orders": tid}
    assert c.internal_topics == {"__consumer_offsets"}
    assert c.unauthorized_topics == {"secret"}
    assert c.invalid_topics == {"bad!"}
    assert c.topics == {"orders", "__consumer_offsets"}


def test_cluster_is_read_only() -> None:
    c = Cluster.from_response(response({"t": [(1, 0, (1,))]}))
    with pytest.raises(TypeError):
        c.partitions_by_topic["x"] = ()  # type: ignore[index]
    with pytest.raises(TypeError):
        c.nodes_by_id[9] = Node(9, "h", 1)  # type: ignore[index]


def test_bootstrap_nodes_have_negative_ids() -> None:
    c = Cluster.bootstrap([("a", 1), ("b", 2)])
    assert [(n.id, n.address) for n in c.nodes] == [(-1, "a:1"), (-2, "b:2")]
    assert c.is_bootstrap


def test_old_versions_without_epoch_or_offline() -> None:
    resp = m.MetadataResponse(
        version=1,
        brokers=(m.MetadataResponseBroker(node_id=0, host="h", port=1),),
        topics=(
            m.MetadataResponseTopic(
                name="t",
                partitions=(
                    m.MetadataResponsePartition(
                        partition_index=0, leader_id=0, replica_nodes=(0,), isr_nodes=(0,)
                    ),
                ),
            ),
        ),
    )
    decoded = m.RESPONSE.decode(m.RESPONSE.encode(resp), 1)
    p = Cluster.from_response(decoded).partitions_for_topic("t")[0]
    assert p.leader_epoch is None
    assert p.offline_replicas == ()
