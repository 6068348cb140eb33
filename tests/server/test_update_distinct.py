"""A broker reads each topic state's partition states by their distinct bodies
(:class:`kmeta.protocol.codec.stream.KeyedStream`, ``update_metadata.topic_reader``) and fills the
cache's columns from them (``TopicBuilder.put_distinct``). The cache it builds must be the
one the whole-request path builds from the same bytes, update after update: distinct leaders,
ISRs and offline replicas, leader -2 deletions, repeated and out-of-order indexes, a topic
sent twice, topic configs (v6+), topic ids (v7+), v8 FULL, more distinct states than the memo
keeps, and unknown tagged fields in a partition state.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from kmeta.metadata.cache import MetadataCache
from kmeta.metadata.update import NOT_SENT
from kmeta.protocol.codec.stream import MEMO_LIMIT
from kmeta.protocol.errors import CorruptMessageError
from kmeta.protocol.messages import update_metadata as um
from kmeta.server.handlers.update_metadata import read, topic_reader
from kmeta.server.streamed import StreamedRequest

BROKERS = (1, 2, 3, 4, 5)


def _state(rng: random.Random, index: int, epoch: int) -> um.UpdateMetadataPartitionState:
    replicas = tuple(rng.sample(BROKERS, 3))
    kind = rng.random()
    isr = replicas if kind < 0.6 else replicas[: rng.randint(1, 3)]
    offline = () if kind < 0.8 else replicas[-1:]
    leader = -2 if kind > 0.97 else (replicas[0] if kind < 0.7 else rng.choice(replicas))
    return um.UpdateMetadataPartitionState(
        partition_index=index, controller_epoch=epoch, leader=leader,
        leader_epoch=rng.randint(0, 3), isr=isr, zk_version=rng.randint(0, 2),
        replicas=replicas, offline_replicas=offline,
    )  # fmt: skip


def _request(rng: random.Random, version: int, topics: int, epoch: int, full: bool) -> bytes:
    states = []
    for t in range(topics):
        n = rng.choice((0, 1, 7, 60))
        indexes = list(range(n))
        if rng.random() < 0.3:
            rng.shuffle(indexes)
        if n and rng.random() < 0.2:
            indexes.append(indexes[0])  # the same partition twice: the last one stands
        parts = tuple(_state(rng, i, epoch) for i in indexes)
        configs = None if rng.random() < 0.5 else (um.KmetaTopicConfig(f"k{t}", str(epoch)),)
        name = f"t{rng.randrange(topics + 2)}"  # some names twice, some topics left out
        states.append(um.UpdateMetadataTopicState(name, uuid.UUID(int=hash(name) & 0xFFFF or 1), parts, configs))
    request = um.UpdateMetadataRequest(
        version=version, controller_id=1, controller_epoch=epoch, broker_epoch=-1,
        type=2 if full else 1, topic_states=tuple(states), live_brokers=(),
    )  # fmt: skip
    return bytes(um.REQUEST.encode(request))


def _apply_distinct(cache: MetadataCache, body: bytes, version: int) -> list[Any]:
    """What the handler does with a request read in steps."""
    streamed = read(body, version, 0)
    assert isinstance(streamed, StreamedRequest)
    update, reader, end = cache.begin_update(version), topic_reader(version), streamed.first
    for _ in range(streamed.count):
        head, parts, tail, end = reader.read(body, end)
        update.add_topic(head.topic_name, head.topic_id if version >= 7 else None, parts,
                         tail.kmeta_topic_configs if version >= 6 else NOT_SENT)  # fmt: skip
    return update.finish(1, streamed.rest(end))


def _seen(cache: MetadataCache) -> tuple[Any, ...]:
    snap = cache.snapshot
    return (
        {name: dict(parts.items()) for name, parts in snap.partition_states.items()},
        dict(snap.topic_ids),
        {name: dict(c) for name, c in snap.topic_configs.items()},
    )


@pytest.mark.parametrize("version", [5, 6, 7, 8])
def test_distinct_path_builds_the_same_cache(version: int) -> None:
    rng = random.Random(version)
    whole, distinct = MetadataCache(1), MetadataCache(1)
    for step in range(12):
        body = _request(rng, version, topics=8, epoch=1 + step // 4, full=step % 3 == 0)
        deleted = whole.update_metadata(1, um.REQUEST.decode(body, version))
        assert _apply_distinct(distinct, body, version) == deleted
        assert _seen(distinct) == _seen(whole)
    assert any(_seen(whole)[0].values())


def test_more_distinct_states_than_the_memo_keeps() -> None:
    parts = tuple(
        um.UpdateMetadataPartitionState(partition_index=i, controller_epoch=1, leader=1 + i % 3,
                                        leader_epoch=i, isr=(1, 2, 3), replicas=(1, 2, 3))
        for i in range(MEMO_LIMIT * 2)
    )  # fmt: skip
    request = um.UpdateMetadataRequest(version=8, controller_id=1, controller_epoch=1, type=2,
                                       topic_states=(um.UpdateMetadataTopicState("big", uuid.UUID(int=7), parts),))
    body = bytes(um.REQUEST.encode(request))
    whole, distinct = MetadataCache(1), MetadataCache(1)
    whole.update_metadata(1, um.REQUEST.decode(body, 8))
    _apply_distinct(distinct, body, 8)
    assert _seen(distinct) == _seen(whole)
    assert distinct.snapshot.partition_states["big"][MEMO_LIMIT + 5].leader_epoch == MEMO_LIMIT + 5


def test_unknown_tagged_fields_of_a_partition_state_are_skipped() -> None:
    """A partition state with a tag section (a newer controller's field) is decoded by the
    element decoder, which skips it; equal states with and without tags agree."""
    part = um.UpdateMetadataPartitionState(partition_index=0, controller_epoch=1, leader=2, leader_epoch=1,
                                           isr=(2, 3), replicas=(2, 3))  # fmt: skip
    request = um.UpdateMetadataRequest(version=8, controller_id=1, controller_epoch=1, type=1,
                                       topic_states=(um.UpdateMetadataTopicState("t", uuid.UUID(int=9),
                                                                                 (part, part._replace(partition_index=1))),))  # fmt: skip
    plain = bytes(um.REQUEST.encode(request))
    at = plain.index(bytes([0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2]))  # partition 1: index, epoch, leader
    tags_at = at + 16 + 9 + 4 + 9 + 1  # fixed fields, isr, zk version, replicas, offline
    assert plain[tags_at] == 0
    tagged = plain[:tags_at] + bytes([1, 99, 2, 7, 7]) + plain[tags_at + 1 :]  # tag 99, 2 bytes
    whole, distinct = MetadataCache(1), MetadataCache(1)
    whole.update_metadata(1, um.REQUEST.decode(tagged, 8))
    _apply_distinct(distinct, tagged, 8)
    assert _seen(distinct) == _seen(whole)
    assert len(distinct.snapshot.partition_states["t"]) == 2


@pytest.mark.parametrize("cut", [1, 5, 17, 40])
def test_a_truncated_topic_state_is_corrupt(cut: int) -> None:
    body = _request(random.Random(3), 8, topics=3, epoch=1, full=True)
    streamed = read(body[: len(body) - cut], 8, 0)
    assert isinstance(streamed, StreamedRequest)
    with pytest.raises(CorruptMessageError):
        _apply_distinct_raw(streamed)


def _apply_distinct_raw(streamed: Any) -> None:
    reader, end = topic_reader(8), streamed.first
    for _ in range(streamed.count):
        _, _, _, end = reader.read(streamed.frame, end)
    streamed.rest(end)


def _periodic_topic(period: int, n: int, change: str) -> um.UpdateMetadataTopicState:
    def state(p: int) -> um.UpdateMetadataPartitionState:
        k = p % period
        replicas = tuple(BROKERS[(k + i) % len(BROKERS)] for i in range(3))
        return um.UpdateMetadataPartitionState(partition_index=p, controller_epoch=1, leader=replicas[0],
                                               leader_epoch=k // len(BROKERS), isr=replicas, zk_version=0,
                                               replicas=replicas)  # fmt: skip

    parts = [state(p) for p in range(n)]
    if change == "last":  # the same size, one byte off
        parts[-1] = parts[-1]._replace(zk_version=1)
    elif change == "shorter":  # a partition whose ISR shrank: one element 4 bytes shorter
        parts[n // 2] = parts[n // 2]._replace(isr=parts[n // 2].isr[:2])
    elif change == "longer-first":
        parts[0] = parts[0]._replace(offline_replicas=(9,))
    elif change == "indexes":  # out of order, repeated
        parts = [p._replace(partition_index=(p.partition_index * 7) % n) for p in parts]
        parts[3] = parts[3]._replace(partition_index=parts[2].partition_index)
    return um.UpdateMetadataTopicState("p", uuid.UUID(int=5), tuple(parts))


@pytest.mark.parametrize("period", [1, 3, 6, 12, 30, 31])
@pytest.mark.parametrize("change", ["none", "last", "shorter", "longer-first", "indexes"])
def test_states_that_repeat_every_few_partitions_read_as_the_whole_decode(period: int, change: str) -> None:
    """A topic's states repeating with a short period are read at C speed (KeyedStream's
    periodic path); any break in the pattern, of bytes or of element sizes, is read one
    element at a time; either way what the whole decode reads, and truncation is corrupt."""
    topic = _periodic_topic(period, 200, change)
    request = um.UpdateMetadataRequest(version=8, controller_id=1, controller_epoch=1, type=1,
                                       topic_states=(topic, _periodic_topic(3, 40, "none")))  # fmt: skip
    body = bytes(um.REQUEST.encode(request))
    whole = um.REQUEST.decode(body, 8)
    streamed = read(body, 8, 0)
    assert isinstance(streamed, StreamedRequest)
    reader, end = topic_reader(8), streamed.first
    for at, t in enumerate(whole.topic_states):
        head, parts, _, end = reader.read(body, end)
        assert head.topic_name == t.topic_name
        got = [parts.states[k]._replace(partition_index=i) for i, k in zip(parts.indexes, parts.keys, strict=True)]
        assert got == list(t.partition_states)
        if at == 1 or (change == "none" and period <= 30):
            assert len(parts.states) == (3 if at else period)  # (read by its period)
    assert streamed.rest(end).live_brokers == ()
    for cut in (1, 7, len(body) // 2):
        short = read(body[: len(body) - cut], 8, 0)
        assert isinstance(short, StreamedRequest)
        with pytest.raises(CorruptMessageError):
            _apply_distinct_raw(short)
