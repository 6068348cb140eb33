"""cluster_to_dict and diff_clusters (what `kmeta metadata --json` and `kmeta watch` print)."""

from __future__ import annotations

import uuid

from kmeta.client import Cluster
from kmeta.client.view import cluster_to_dict, diff_clusters
from kmeta.protocol.errors import ErrorCode

from .helpers import response


def test_cluster_to_dict() -> None:
    tid = uuid.uuid4()
    c = Cluster.from_response(
        response(
            {"a": [(1, 4, (1, 2))], "gone": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION},
            topic_ids={"a": tid},
        )
    )
    d = cluster_to_dict(c)
    assert d["cluster_id"] == "c1"
    assert [b["id"] for b in d["brokers"]] == [1, 2, 3]
    assert d["topics"] == [
        {
            "name": "a",
            "topic_id": str(tid),
            "internal": False,
            "error": None,
            "partitions": [
                {
                    "partition": 0,
                    "leader": 1,
                    "leader_epoch": 4,
                    "replicas": [1, 2],
                    "isr": [1, 2],
                    "offline": [],
                    "error": None,
                }
            ],
        },
        {
            "name": "gone",
            "topic_id": None,
            "internal": False,
            "error": "UNKNOWN_TOPIC_OR_PARTITION",
            "partitions": [],
        },
    ]


def test_diff_names_every_kind_of_change() -> None:
    old = Cluster.from_response(
        response({"a": [(1, 0, (1, 2)), (2, 0, (2, 3))], "b": [(1, 0, (1,))]}, brokers=(1, 2, 3))
    )
    new = Cluster.from_response(
        response(
            {"a": [(2, 1, (1, 2)), (2, 0, (2,))], "c": [(1, 0, (1,)), (1, 0, (1,))]},
            brokers=(1, 2, 4),
            controller_id=2,
        )
    )
    got = [(c.kind, c.subject, c.detail) for c in diff_clusters(old, new)]
    assert got == [
        ("broker_removed", "broker 3", "b3:9003"),
        ("broker_added", "broker 4", "b4:9004"),
        ("controller_changed", "cluster", "1 -> 2"),
        ("leader_changed", "a-0", "1 -> 2 (epoch 1)"),
        ("replicas_changed", "a-1", "2,3 -> 2"),
        ("isr_changed", "a-1", "2,3 -> 2"),
        ("topic_deleted", "b", "gone"),
        ("topic_created", "c", "2 partitions"),
    ]
    assert diff_clusters(new, new) == []
