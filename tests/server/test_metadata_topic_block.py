"""A Metadata topic block encoded from the cache's columns (each distinct partition state
once) is byte for byte the block of the record built partition by partition, at every
version and for every case of leader and replica liveness."""

from __future__ import annotations

import pytest

from kmeta.metadata.cache import MetadataCache
from kmeta.protocol.messages import metadata as md
from kmeta.server.handlers.metadata import INTERNAL_TOPICS, _ops, partitions, topic_record
from kmeta.server.metadata_blocks import View, encode_topic, splice
from kmeta.server.metadata_blocks.topics import _topic_splice
from tests.server.helpers import live_broker, partition, topic_id, update_metadata

#: broker 1 has both listeners, 2 only PLAINTEXT, 3 is not alive, 4 only INTERNAL
BROKERS = [
    live_broker(1, {"PLAINTEXT": ("h1", 9092), "INTERNAL": ("h1", 9093)}),
    live_broker(2, {"PLAINTEXT": ("h2", 9092)}, rack="r"),
    live_broker(4, {"INTERNAL": ("h4", 9093)}),
]


def _cache() -> MetadataCache:
    cache = MetadataCache(1, cluster_id="c")
    # arrival order not by index, a gap, every leader case, replicas on dead brokers,
    # offline replicas, equal states on several partitions, other leader epochs
    parts = [
        partition(5, 1, (1, 2, 3), isr=(1, 2), offline=(3,)),
        partition(0, 2, (2, 1, 4)),
        partition(2, 3, (3, 1), isr=(3,)),
        partition(1, 4, (4, 1)),
        partition(7, 1, (1, 2, 3), isr=(1, 2), offline=(3,)),
        partition(3, -1, (1, 2), leader_epoch=7),
        partition(4, 2, (2, 1, 4), leader_epoch=3),
        *(partition(i, 1 + i % 2, (1, 2)) for i in range(8, 40)),
    ]
    # every element the same size (joined at once, the indexes written in as columns)
    even = [partition(i, 1 + i % 2, (1, 2) if i % 2 else (2, 1), leader_epoch=i % 3) for i in range(50)]
    # partitions 0..n-1 repeating every 6 (as assigned on 3 brokers): that many encoded, repeated;
    # the same but for the last one, and repeating with elements of two sizes: one by one
    def assigned(i: int, epoch: int = 0) -> object:
        r = [(1, 2, 4), (2, 4, 1), (4, 1, 2), (1, 4, 2), (2, 1, 4), (4, 2, 1)][i % 6]
        return partition(i, r[0], r, leader_epoch=epoch)

    periodic = [assigned(i) for i in range(100)]
    almost = [*periodic[:99], assigned(99, epoch=1)]
    sizes = [partition(i, 1, (1, 2) if i % 2 else (1, 2, 4)) for i in range(40)]
    cache.update_metadata(1, update_metadata(BROKERS, {
        "t": parts, "__consumer_offsets": parts[:3], "even": even, "periodic": periodic, "almost": almost,
        "sizes": sizes,
    }))  # fmt: skip
    return cache


@pytest.mark.parametrize("version", range(14))
@pytest.mark.parametrize("listener", ["PLAINTEXT", "INTERNAL"])
@pytest.mark.parametrize("topic_ops", [False, True])
def test_the_block_from_columns_is_the_record_block(version: int, listener: str, topic_ops: bool) -> None:
    snap = _cache().snapshot
    view = View(version, listener, topic_ops)
    _topic_splice(version)  # (the layout the columns need: raises when a version lacks it)
    held = {n: snap.partition_states[n] for n in ("periodic", "almost", "sizes", "t")}
    assert [p.period() for p in held.values()] == [6, None, 2, None]
    for name in ("t", "__consumer_offsets", "even", "periodic", "almost", "sizes"):
        record = md.MetadataResponseTopic(
            0, name, topic_id(name), name in INTERNAL_TOPICS,
            partitions(snap, name, version, listener), _ops(topic_ops),
        )  # fmt: skip
        assert encode_topic(snap, view, name, topic_id(name), topic_record) == splice(version).element(record)
