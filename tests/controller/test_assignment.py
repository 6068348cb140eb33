"""Replica assignment (Kafka's AdminUtils) and leader election rules."""

from __future__ import annotations

import collections

import pytest

from kmeta.controller.model import PartitionRegistration
from kmeta.controller.topics.assignment import AssignmentError, assign_replicas, rack_alternated
from kmeta.controller.topics.election import (
    add_replica,
    is_unclean,
    remove_replicas,
    unclean_allowed,
)


def test_rack_unaware_matches_kafka_layout():
    # Kafka's AdminUtils doc example: 5 brokers, 10 partitions, RF 3, start index 0, shift 0.
    got = assign_replicas(dict.fromkeys(range(5)), 10, 3, fixed_start_index=0)
    assert got[0] == [0, 1, 2]
    assert got[4] == [4, 0, 1]
    assert got[5] == [0, 2, 3]  # the shift grows by one after every n partitions
    assert got[9] == [4, 1, 2]


def _kafka_walk(ids, n_parts, rf, start_index, shift, start_partition):
    """AdminUtils.assignReplicasToBrokersRackUnaware, partition by partition."""
    n, out, current = len(ids), {}, max(0, start_partition)
    for _ in range(n_parts):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start_index) % n
        out[current] = [ids[first]] + [
            ids[(first + 1 + (shift + j) % (n - 1)) % n] for j in range(rf - 1)
        ]
        current += 1
    return out


@pytest.mark.parametrize("n", [2, 3, 4, 7])
@pytest.mark.parametrize("start_partition", [-1, 0, 5, 13])
def test_rack_unaware_tiled_lists_equal_the_partition_by_partition_walk(n, start_partition):
    ids = [10 * (i + 1) for i in range(n)]
    for fixed in range(n):
        for n_parts in (1, n * (n - 1) - 1, n * (n - 1), 3 * n * (n - 1) + 2, 1000):
            for rf in range(1, n + 1):
                got = assign_replicas(
                    dict.fromkeys(ids), n_parts, rf, fixed_start_index=fixed,
                    start_partition=start_partition,
                )  # fmt: skip
                assert got == _kafka_walk(ids, n_parts, rf, fixed, fixed, start_partition)


def test_leaders_and_replicas_are_spread_evenly():
    got = assign_replicas(dict.fromkeys([1, 2, 3]), 12, 3)
    leaders = collections.Counter(r[0] for r in got.values())
    assert set(leaders.values()) == {4}
    assert all(len(set(r)) == 3 for r in got.values())


def test_rack_aware_puts_each_replica_on_another_rack():
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    assert rack_alternated(racks) == [1, 3, 5, 2, 4, 6]
    got = assign_replicas(racks, 30, 3)
    for replicas in got.values():
        assert len({racks[b] for b in replicas}) == 3


def test_replication_factor_above_brokers_is_refused():
    with pytest.raises(AssignmentError, match="larger than available brokers: 2"):
        assign_replicas({1: None, 2: None}, 1, 3)


def test_create_partitions_continue_from_start_partition():
    got = assign_replicas(dict.fromkeys([1, 2, 3]), 2, 2, fixed_start_index=0, start_partition=3)
    assert sorted(got) == [3, 4]


def test_dead_leader_is_replaced_by_first_live_isr_member():
    st = PartitionRegistration((1, 2, 3), (1, 2, 3), 1, 5, 7)
    new = remove_replicas(st, {1}.__contains__)
    assert (new.leader, new.isr, new.leader_epoch, new.partition_epoch) == (2, (2, 3), 6, 8)


def test_no_unclean_election_and_isr_never_empty():
    st = PartitionRegistration((1, 2), (1,), 1)
    new = remove_replicas(st, {1}.__contains__)
    assert new.leader == -1
    assert new.isr == (1,)
    # 2 comes back: not in the ISR, so it cannot lead (no unclean election)
    assert add_replica(new, 2, lambda b: b == 2) is new
    # 1 comes back: it is the ISR, so it leads again
    back = add_replica(new, 1, lambda b: b in (1, 2))
    assert back.leader == 1


def test_returning_follower_waits_for_the_leaders_alter_partition():
    # Kafka: the leader adds it to the ISR (AlterPartition) once it caught up, not its return
    st = PartitionRegistration((1, 2, 3), (2, 3), 2, 1, 1)
    assert add_replica(st, 1, lambda b: True) is st
    assert add_replica(st, 1, lambda b: True, unclean=True) is st  # led: no election at all


def test_unclean_election_only_when_the_topic_allows_it():
    st = PartitionRegistration((1, 2, 3), (1,), 1, 4, 9)
    assert is_unclean(st, remove_replicas(st, {1}.__contains__)) is False  # offline, clean
    offline = remove_replicas(st, {1}.__contains__)
    assert (offline.leader, offline.isr) == (-1, (1,))
    # allowed: the first live replica leads alone, both epochs bumped once
    new = remove_replicas(st, {1}.__contains__, lambda b: b in (2, 3))
    assert (new.leader, new.isr, new.leader_epoch, new.partition_epoch) == (2, (2,), 5, 10)
    assert is_unclean(st, new)
    # a replica returning to an offline partition it is not in the ISR of: only if allowed
    assert add_replica(offline, 3, lambda b: b == 3) is offline
    back = add_replica(offline, 3, lambda b: b == 3, unclean=True)
    assert (back.leader, back.isr) == (3, (3,))
    assert is_unclean(offline, back)
    # its ISR's member returning leads again (clean) whatever the setting
    clean = add_replica(offline, 1, lambda b: b in (1, 3), unclean=True)
    assert (clean.leader, clean.isr) == (1, (1,))
    assert not is_unclean(offline, clean)
    assert unclean_allowed({"unclean.leader.election.enable": "true"})
    assert not unclean_allowed({})
