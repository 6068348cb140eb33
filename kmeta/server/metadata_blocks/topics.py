"""One topic's encoded Metadata block: from the cache's columns, kept across snapshots.

A topic block is the encoded ``MetadataResponseTopic`` that the handler's rule
(:data:`TopicRecord`) makes of the topic's partitions. It is never made partition by partition:
a topic's partitions share few distinct (leader, epoch, replica sets), so the rule is asked
once per distinct state and each is encoded once; the block is joined from those elements and
the indexes, read off the cache's columns (at 1M partitions a broker's first all-topics answer
spent most of its time making a record per partition, then encoding each). Partitions that
repeat every few (:meth:`~kmeta.metadata.partitions.TopicPartitions.period`) are their first
period's elements repeated; the indexes are written in as byte columns
(:mod:`kmeta.protocol.codec.columnar` gives both, and what they gain).
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Callable, Sequence
from typing import TypeAlias

from kmeta.metadata.partitions import LeadershipKey, iota
from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.protocol.codec import columnar
from kmeta.protocol.codec.splice import Splice
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.messages import metadata as md
from kmeta.server.metadata_blocks.cache import MetadataBlocks, View, splice

#: one partition as the rule reads it: (index, leader, leader epoch, replicas, isr, offline)
PartitionRow: TypeAlias = tuple[int, int, int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]
#: the handler's rule: ``(snap, view, name, topic id, rows) -> the topic's record`` with one
#: partition record per row, in the rows' order
TopicRecord: TypeAlias = Callable[
    [MetadataSnapshot, View, str, uuid.UUID, Sequence[PartitionRow]], md.MetadataResponseTopic
]
#: views (version, listener, topic_ops) whose blocks a topic keeps across snapshots
TOPIC_MEMO_VIEWS = 2
_INDEX = struct.Struct(">i")


@functools.cache
def _topic_splice(version: int) -> Splice:
    """A topic block laid out around its partitions; a partition's element must be its error
    code, its index, then bytes that do not depend on the index (checked here on the
    encoder's own output, once per version)."""
    topic = splice(version).inner("partitions")
    probe = md.MetadataResponsePartition(0, 0x01020304, 5, 6, (5, 7), (5,), ())
    a, b = topic.element(probe), topic.element(probe._replace(partition_index=0))
    if a[2:6] != b"\x01\x02\x03\x04" or b[2:6] != bytes(4) or a[:2] + a[6:] != b[:2] + b[6:]:
        raise RuntimeError(f"Metadata v{version}: a partition is not laid out as error code, index, rest")
    return topic


def encode_topic(snap: MetadataSnapshot, view: View, name: str, topic_id: uuid.UUID, rule: TopicRecord) -> bytes:
    """``name``'s encoded MetadataResponseTopic for ``view``: the bytes
    ``splice(version).element`` writes for the record ``rule`` makes of all its partitions."""
    parts = snap.partition_states[name]
    topic = _topic_splice(view.version)
    period = parts.period() if len(parts) >= columnar.PERIODIC_FROM else None
    indexes, keys, sets = parts.leadership(period)
    distinct = list(dict.fromkeys(keys))
    record = rule(snap, view, name, topic_id, [
        (0, leader, epoch, sets[replicas], sets[isr], sets[offline])
        for leader, epoch, isr, replicas, offline in distinct
    ])  # fmt: skip
    # each distinct state's element, index 0
    encoded: dict[LeadershipKey, bytes] = dict(zip(distinct, map(topic.element, record.partitions), strict=True))
    out: list[bytes | bytearray] = [
        topic.head(error_code=record.error_code, name=record.name, topic_id=record.topic_id,
                   is_internal=record.is_internal),
        topic.count(len(parts)),
    ]  # fmt: skip
    sizes = set(map(len, encoded.values()))
    if len(sizes) == 1:
        # every element the same size (the common case): joined at C speed, then the
        # indexes written in as byte columns (an element is error code, index, the rest);
        # partitions repeating every ``period`` are that many elements repeated
        (stride,) = sizes
        first = b"".join(map(encoded.__getitem__, keys))
        if period is not None:
            n = len(parts)
            body = bytearray((first * (n // period + 1))[: n * stride])
            columnar.write_int32_column(body, 2, stride, iota(n))  # (partitions 0..n-1 in order)
        else:
            body = bytearray(first)
            columnar.write_int32_column(body, 2, stride, indexes)
        out.append(body)
    else:
        if period is not None:  # (each partition's key is its period's)
            indexes, keys, sets = parts.leadership()
        append, pack = out.append, _INDEX.pack
        for index, key in zip(indexes, keys, strict=True):
            element = encoded[key]
            append(element[:2])
            append(pack(index))
            append(element[6:])
    out.append(topic.tail(topic_authorized_operations=record.topic_authorized_operations))
    return b"".join(out)


def topic_block(blocks: MetadataBlocks, view: View, table: dict[str, bytes], name: str, rule: TopicRecord) -> bytes:
    """``name``'s encoded block for ``view``: from this snapshot's ``table``, else from the
    topic's own memo (``TopicPartitions.derived``: it outlives snapshots while the topic is
    unchanged, so an update of some topics re-encodes those only, not the other 999,000
    partitions), else encoded now. A memo entry counts only with the same live nodes and
    topic id."""
    block = table.get(name)
    if block is None:
        snap = blocks.snap
        memo: dict[View, tuple[object, uuid.UUID, bytes]] = snap.partition_states[name].derived
        topic_id = snap.topic_ids.get(name, ZERO_UUID)
        kept = memo.get(view)
        if kept is not None and kept[0] is snap.alive_nodes and kept[1] == topic_id:
            block = table[name] = kept[2]
            return block
        block = table[name] = encode_topic(snap, view, name, topic_id, rule)
        if len(memo) >= TOPIC_MEMO_VIEWS:  # bounded: each view is ~42 B per partition
            memo.pop(next(iter(memo)))
        memo[view] = (snap.alive_nodes, topic_id, block)
    return block


def unencoded(blocks: MetadataBlocks, view: View) -> tuple[list[str], int]:
    """The topics whose block for ``view`` is neither in this snapshot's table nor kept by the
    topic (see :func:`topic_block`), and all topics' partition count."""
    snap, table = blocks.snap, blocks.topic_blocks(view)
    names, total = [], 0
    for name, parts in snap.partition_states.items():
        total += len(parts)
        if name in table:
            continue
        kept = parts.derived.get(view)
        if kept is None or kept[0] is not snap.alive_nodes:
            names.append(name)
    return names, total
