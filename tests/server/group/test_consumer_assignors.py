"""The server-side assignors (uniform, range): balance, stickiness, co-partitioning."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import Mapping

import pytest

from kmeta.server.group.assignors import Assignment, MemberSpec, assignors
from kmeta.server.group.assignors.range import RangeAssignor
from kmeta.server.group.assignors.uniform import UniformAssignor

T1, T2, T3 = (uuid.UUID(int=i) for i in (1, 2, 3))


def owners(result: Mapping[str, Assignment]) -> Counter[tuple[uuid.UUID, int]]:
    return Counter((t, p) for a in result.values() for t, ps in a.items() for p in ps)


def sizes(result: Mapping[str, Assignment]) -> list[int]:
    return sorted(sum(len(ps) for ps in a.values()) for a in result.values())


def test_the_broker_offers_uniform_first_then_range() -> None:
    assert list(assignors()) == ["uniform", "range"]


def test_uniform_spreads_six_partitions_over_three_members_each_once() -> None:
    members = {m: MemberSpec(frozenset({T1})) for m in ("a", "b", "c")}
    result = UniformAssignor().assign(members, {T1: 6})
    assert owners(result) == Counter({(T1, p): 1 for p in range(6)})
    assert sizes(result) == [2, 2, 2]


def test_uniform_is_sticky_when_a_member_joins() -> None:
    before = UniformAssignor().assign({m: MemberSpec(frozenset({T1})) for m in ("a", "b")}, {T1: 6})
    members = {m: MemberSpec(frozenset({T1}), before[m]) for m in ("a", "b")}
    members["c"] = MemberSpec(frozenset({T1}))
    after = UniformAssignor().assign(members, {T1: 6})
    assert sizes(after) == [2, 2, 2]
    for m in ("a", "b"):  # each keeps two of its three; only what c needs moves
        assert len(after[m][T1] & before[m][T1]) == 2


def test_uniform_moves_only_the_leavers_partitions() -> None:
    three = UniformAssignor().assign({m: MemberSpec(frozenset({T1})) for m in "abc"}, {T1: 6})
    members = {m: MemberSpec(frozenset({T1}), three[m]) for m in "ab"}
    after = UniformAssignor().assign(members, {T1: 6})
    assert owners(after) == Counter({(T1, p): 1 for p in range(6)})
    for m in "ab":
        assert three[m][T1] <= after[m][T1]


def test_uniform_gives_added_partitions_and_drops_removed_topics() -> None:
    members = {m: MemberSpec(frozenset({T1})) for m in "ab"}
    first = UniformAssignor().assign(members, {T1: 4})
    grown = UniformAssignor().assign({m: MemberSpec(frozenset({T1}), first[m]) for m in "ab"}, {T1: 6})
    assert owners(grown) == Counter({(T1, p): 1 for p in range(6)})
    gone = UniformAssignor().assign({m: MemberSpec(frozenset({T1}), first[m]) for m in "ab"}, {})
    assert all(not a for a in gone.values())


@pytest.mark.parametrize("seed", range(20))
def test_uniform_heterogeneous_assigns_each_partition_once_to_a_subscriber(seed: int) -> None:
    rng = random.Random(seed)
    topics = {T1: rng.randint(1, 9), T2: rng.randint(1, 9), T3: rng.randint(1, 9)}
    members = {
        f"m{i}": MemberSpec(frozenset(rng.sample(sorted(topics), rng.randint(1, 3))))
        for i in range(rng.randint(2, 6))
    }
    result = UniformAssignor().assign(members, topics)
    subscribed = {t for spec in members.values() for t in spec.subscribed_topic_ids}
    assert owners(result) == Counter({(t, p): 1 for t in subscribed for p in range(topics[t])})
    for m, a in result.items():
        assert set(a) <= members[m].subscribed_topic_ids
    # sticky: the same input with the result as current assignment changes nothing
    again = UniformAssignor().assign(
        {m: MemberSpec(s.subscribed_topic_ids, result[m]) for m, s in members.items()}, topics
    )
    assert again == result


def test_uniform_heterogeneous_balances_shared_topics() -> None:
    members = {"a": MemberSpec(frozenset({T1, T2})), "b": MemberSpec(frozenset({T1})), "c": MemberSpec(frozenset({T2}))}
    result = UniformAssignor().assign(members, {T1: 3, T2: 3})
    assert sizes(result) == [2, 2, 2]


def test_range_is_co_partitioned() -> None:
    members = {m: MemberSpec(frozenset({T1, T2})) for m in ("m0", "m1")}
    result = RangeAssignor().assign(members, {T1: 3, T2: 3})
    assert result["m0"] == {T1: frozenset({0, 1}), T2: frozenset({0, 1})}
    assert result["m1"] == {T1: frozenset({2}), T2: frozenset({2})}


def test_range_orders_static_members_by_instance_id_first() -> None:
    members = {
        "z-dynamic": MemberSpec(frozenset({T1})),
        "b": MemberSpec(frozenset({T1}), instance_id="i1"),
        "a": MemberSpec(frozenset({T1}), instance_id="i2"),
    }
    result = RangeAssignor().assign(members, {T1: 3})
    assert [result[m][T1] for m in ("b", "a", "z-dynamic")] == [frozenset({0}), frozenset({1}), frozenset({2})]


def test_range_heterogeneous_ranges_per_topic_subscribers() -> None:
    members = {"a": MemberSpec(frozenset({T1, T2})), "b": MemberSpec(frozenset({T1}))}
    result = RangeAssignor().assign(members, {T1: 4, T2: 2})
    assert result["a"] == {T1: frozenset({0, 1}), T2: frozenset({0, 1})}
    assert result["b"] == {T1: frozenset({2, 3})}


def test_more_members_than_partitions_leaves_some_empty() -> None:
    members = {m: MemberSpec(frozenset({T1})) for m in "abcd"}
    for assignor in (UniformAssignor(), RangeAssignor()):
        result = assignor.assign(members, {T1: 2})
        assert owners(result) == Counter({(T1, 0): 1, (T1, 1): 1})
        assert sizes(result) == [0, 0, 1, 1]


def test_group_consumer_assignors_orders_what_is_offered() -> None:
    assert list(assignors(("range",))) == ["range"]
    assert list(assignors(("RangeAssignor", "UniformAssignor"))) == ["range", "uniform"]
