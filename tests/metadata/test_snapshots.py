"""Snapshots are immutable, shared structurally, and isolated from later updates."""

from __future__ import annotations

import dataclasses
import random
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kmeta.metadata import DELETED, CowMap, MetadataCache, MetadataSnapshot, TopicPartition
from tests.metadata.umr import B, P, umr

BROKERS = [B.plain(1), B.plain(2), B.plain(3)]


def frozen_view(snap: MetadataSnapshot) -> dict[str, Any]:
    """A deep plain copy of everything a reader can see."""
    return {
        "parts": {t: dict(p) for t, p in snap.partition_states.items()},
        "ids": dict(snap.topic_ids),
        "controller": snap.controller_id,
        "brokers": dict(snap.alive_brokers),
        "nodes": {b: dict(n) for b, n in snap.alive_nodes.items()},
        "version": snap.version,
        "names": snap.topic_names_sorted,
    }


def test_readers_holding_an_old_snapshot_are_unaffected() -> None:
    cache = MetadataCache(1)
    ids = {"a": uuid.uuid4(), "b": uuid.uuid4()}
    cache.update_metadata(1, umr(8, [P("a", 0), P("a", 1), P("b", 0)], BROKERS, topic_ids=ids))
    held = cache.snapshot
    seen = frozen_view(held)

    cache.update_metadata(2, umr(8, [P("a", 0, leader=2), P("c", 0)], BROKERS, topic_ids=ids))
    cache.update_metadata(3, umr(8, [P("a", 1, leader=-2), P("b", 0, leader=-2)], [B.plain(9)]))
    cache.update_metadata(4, umr(8, [P("z", 0)], BROKERS, type_=2, controller_id=7))
    cache.update_metadata(5, umr(0, [P("y", 3)], BROKERS))

    assert frozen_view(held) == seen
    assert cache.snapshot is not held
    assert set(cache.get_all_topics()) == {"z", "y"}


def test_snapshot_fields_cannot_be_reassigned() -> None:
    snap = MetadataSnapshot.empty("c")
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.version = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        snap.partition_states["t"] = {}  # type: ignore[index]


def test_untouched_topics_are_shared_not_copied() -> None:
    cache = MetadataCache(1)
    cache.update_metadata(1, umr(7, [P(f"t{i}", p) for i in range(50) for p in range(4)], BROKERS))
    before = cache.snapshot
    before.derived["block"] = b"encoded"
    cache.update_metadata(2, umr(7, [P("t7", 2, leader=3)], BROKERS))
    after = cache.snapshot
    for t in before.partition_states:
        if t != "t7":
            assert after.partition_states[t] is before.partition_states[t]
    assert after.partition_states["t7"] is not before.partition_states["t7"]
    # the other partitions of the touched topic keep their states, and share their replica
    # sets (states are columns of the topic, made on access: there is no record to share)
    assert after.partition_states["t7"][0] == before.partition_states["t7"][0]
    assert after.partition_states["t7"][0].replicas is before.partition_states["t7"][0].replicas
    assert after.partition_states["t7"][2].leader == 3
    assert after.derived == {}  # derived data belongs to its snapshot
    assert before.derived == {"block": b"encoded"}
    # the topic set did not change: the sorted names are computed once and shared
    assert after.topic_names_sorted is before.topic_names_sorted


def test_identical_replica_sets_share_one_tuple() -> None:
    cache = MetadataCache(1)
    cache.update_metadata(
        1, umr(7, [P("a", 0, replicas=(1, 2, 3)), P("b", 5, replicas=(1, 2, 3))], BROKERS)
    )
    a, b = cache.get_partition_info("a", 0), cache.get_partition_info("b", 5)
    assert a is not None
    assert b is not None
    assert a.replicas is b.replicas
    assert a.isr is b.replicas
    assert a.topic_name == "a"  # v5+ records carry '' on the wire; the cache fills it in


def test_many_topics_updates_match_a_plain_model() -> None:
    """Enough topics and updates to fold CowMap overlays several times."""
    rng = random.Random(7)
    cache = MetadataCache(1)
    model: dict[str, dict[int, int]] = {}
    history: list[tuple[MetadataSnapshot, dict[str, dict[int, int]]]] = []
    for n in range(300):
        parts = []
        for _ in range(rng.randint(1, 6)):
            t, p = f"t{rng.randrange(400)}", rng.randrange(3)
            leader = -2 if rng.random() < 0.3 else rng.randrange(1, 4)
            parts.append(P(t, p, leader=leader))
            if leader == -2:
                if t in model:
                    model[t].pop(p, None)
                    if not model[t]:
                        del model[t]
            else:
                model.setdefault(t, {})[p] = leader
        cache.update_metadata(n, umr(7, parts, BROKERS))
        history.append((cache.snapshot, {t: dict(v) for t, v in model.items()}))
    for snap, expected in history:  # every version still reads as it was
        got = {t: {i: s.leader for i, s in ps.items()} for t, ps in snap.partition_states.items()}
        assert got == expected
        assert len(snap.partition_states) == len(expected)
        assert snap.topic_names_sorted == tuple(sorted(expected))
    for t, ps in model.items():
        assert cache.contains(t)
        assert all(cache.contains(TopicPartition(t, p)) for p in ps)


ops = st.lists(
    st.dictionaries(st.integers(0, 400), st.one_of(st.just(None), st.integers(0, 5)), max_size=12),
    max_size=60,
)


@settings(max_examples=40, deadline=None)
@given(ops)
def test_cowmap_behaves_like_a_dict_and_old_versions_stay(
    batches: list[dict[int, int | None]],
) -> None:
    versions: list[tuple[CowMap[int, int], dict[int, int]]] = [(CowMap(), {})]
    for batch in batches:
        m, model = versions[-1]
        new_model = dict(model)
        for k, v in batch.items():
            if v is None:
                new_model.pop(k, None)
            else:
                new_model[k] = v
        changes = {k: (DELETED if v is None else v) for k, v in batch.items()}
        versions.append((m.evolve(changes), new_model))
    for m, model in versions:
        assert dict(m.items()) == model
        assert dict(m.iter_items()) == model
        assert sorted(m.values()) == sorted(model.values())
        assert m == model  # Mapping equality
        assert len(m) == len(model)
        assert sorted(m) == sorted(model)
        for k in range(0, 401, 7):
            assert (k in m) == (k in model)
            assert m.get(k) == model.get(k)
            assert m.get(k, -1) == model.get(k, -1)
        if model:
            k0 = next(iter(model))
            assert m[k0] == model[k0]
        with pytest.raises(KeyError):
            m[-1]


def test_cowmap_update_copies_the_overlay_not_the_base() -> None:
    big: CowMap[int, int] = CowMap({i: i for i in range(10_000)})
    limit = 2 * 100  # 2 * sqrt(10k)
    versions = [big]
    for i in range(limit):
        versions.append(versions[-1].evolve({i: -i}))
    # every version so far shares the one base dict; only overlays were copied
    assert all(v._base is big._base for v in versions)
    assert len(versions[-1]._over) == limit
    folded = versions[-1].evolve({limit: -1})  # one past the bound: folded into a new base
    assert folded._base is not big._base
    assert folded._over == {}
    assert folded[5] == -5
    assert folded[limit] == -1
    assert big[5] == 5  # the original is untouched
    assert versions[1][1] == 1  # version 1 changed only key 0
    assert versions[2][1] == -1


def test_a_topic_put_in_one_loop_equals_put_one_by_one() -> None:
    """TopicBuilder.put_states (a full update's path) builds what put does, partition by
    partition: new rows, replaced rows in place, a row deleted then put again, offline sets."""
    from kmeta.metadata.partitions import TopicBuilder, TopicPartitions
    from kmeta.protocol.messages import update_metadata as um

    def state(i: int, leader: int, epoch: int = 1, offline: tuple[int, ...] = ()) -> Any:
        return um.UpdateMetadataPartitionState(
            partition_index=i, controller_epoch=2, leader=leader, leader_epoch=epoch,
            isr=(leader, 9), zk_version=i, replicas=(leader, 9, 8), offline_replicas=offline,
        )  # fmt: skip

    current = TopicPartitions.of("t")
    first = TopicBuilder("t", current)
    first.put_states([state(i, 1 + i % 3, offline=(8,) if i % 2 else ()) for i in (3, 0, 2, 1)])
    base = first.freeze()
    batch = [state(2, 9, epoch=5), state(7, 8), state(0, 1, offline=(9, 8))]
    one, many = TopicBuilder("t", base), TopicBuilder("t", base)
    assert one.delete(2)
    assert many.delete(2)
    for p in batch:
        one.put(p.partition_index, p.controller_epoch, p.leader, p.leader_epoch, p.isr,
                p.zk_version, p.replicas, p.offline_replicas)  # fmt: skip
    many.put_states(batch)
    assert one.changed
    assert many.changed
    assert one.freeze() == many.freeze()
    assert dict(many.freeze().items())[2].leader_epoch == 5
    assert sorted(many.freeze()) == [0, 1, 2, 3, 7]
    assert dict(base.items())[1].offline_replicas == (8,)
