"""The cache keeps a partition in tens of bytes, not an object per partition.

100 topics x 1000 partitions at RF 3, applied from the decoded wire records (fresh replica and
ISR tuples per partition, as the decoder makes them). tracemalloc counts what the cache still
holds once the request is gone: a PartitionState tuple per partition in a dict per topic was
~157 bytes per partition; columns per topic (kmeta.metadata.partitions) are ~36.
"""

from __future__ import annotations

import gc
import tracemalloc
import uuid

from kmeta.metadata import MetadataCache
from kmeta.metadata.partitions import TopicPartitions
from kmeta.protocol.messages import update_metadata as um

TOPICS, PER_TOPIC = 100, 1000
BROKERS = (1, 2, 3)


def request_bytes() -> bytes:
    def part(p: int) -> um.UpdateMetadataPartitionState:
        r = tuple(BROKERS[(p + i) % 3] for i in range(3))
        return um.UpdateMetadataPartitionState(partition_index=p, controller_epoch=1, leader=r[0],
                                               leader_epoch=3, isr=r, zk_version=2, replicas=r)  # fmt: skip

    parts = tuple(part(p) for p in range(PER_TOPIC))
    return um.REQUEST.encode(um.UpdateMetadataRequest(
        version=8, controller_id=1, type=2, controller_epoch=1,
        topic_states=tuple(um.UpdateMetadataTopicState(f"t{t:03d}", uuid.UUID(int=t + 1), parts)
                           for t in range(TOPICS)),
    ))  # fmt: skip


def test_a_cached_partition_costs_under_60_bytes() -> None:
    body = request_bytes()
    cache = MetadataCache(1)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache.update_metadata(1, um.REQUEST.decode(body, 8))
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    per_partition = held / (TOPICS * PER_TOPIC)
    assert per_partition < 60, f"{per_partition:.0f} bytes per cached partition"
    # and what is held is the whole update, read back as states
    parts = cache.snapshot.partition_states["t042"]
    assert isinstance(parts, TopicPartitions)
    state = parts[999]
    assert (state.topic_name, state.partition_index, state.leader, state.leader_epoch) == ("t042", 999, 1, 3)
    assert state.replicas == (1, 2, 3)
    assert state.isr == (1, 2, 3)
    assert state.zk_version == 2
    assert list(parts)[:3] == [0, 1, 2]
    # equal replica sets are one tuple across every topic
    assert cache.snapshot.partition_states["t000"][0].replicas is parts[0].replicas


def test_a_frozen_topic_is_index_addressed_exactly_when_its_indexes_are_0_to_n() -> None:
    """(freeze compares the indexes with a slice of one kept 0..n array, grown as needed)"""
    from kmeta.metadata.partitions import TopicBuilder

    for indexes in ([0, 1, 2], list(range(5000)), [0, 1], [1, 0, 2], [0, 2], [*range(4999), 6000], [7]):
        builder = TopicBuilder("t")
        for i in indexes:
            builder.put(i, 1, 1, 0, (1,), 0, (1,), ())
        frozen = builder.freeze()
        assert (frozen._rows is None) == (indexes == list(range(len(indexes)))), indexes[:5]
        assert sorted(frozen) == sorted(indexes)
        assert frozen[indexes[-1]].leader == 1
