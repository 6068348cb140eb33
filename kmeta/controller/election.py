"""Leader election and ISR changes, as Kafka's ZooKeeper-mode controller makes them.

* Never unclean: a new leader always comes from the ISR; with no live ISR member the partition
  goes offline (leader -1) and the ISR keeps its last member, as Kafka never shrinks it to empty.
* Every controller-made change bumps the leader epoch (ZooKeeper mode does so for ISR shrinks
  too) and the partition epoch.
"""

from __future__ import annotations

from collections.abc import Callable

from kmeta.controller.model import NO_LEADER, PartitionState


def elect_leader(st: PartitionState, eligible: Callable[[int], bool]) -> int:
    """First replica in ISR order that is ``eligible``, else -1 (no unclean election)."""
    for r in st.isr:
        if eligible(r):
            return r
    return NO_LEADER


def _changed(st: PartitionState, leader: int, isr: tuple[int, ...]) -> PartitionState:
    if leader == st.leader and isr == st.isr:
        return st
    # tuple.__new__: NamedTuple's _replace is slow Python, and a resync changes 100k of these
    return tuple.__new__(
        PartitionState, (st.replicas, isr, leader, st.leader_epoch + 1, st.partition_epoch + 1)
    )


def remove_replicas(st: PartitionState, gone: Callable[[int], bool]) -> PartitionState:
    """Drop ``gone`` brokers from the ISR (never to empty) and re-elect if the leader went."""
    isr = tuple(r for r in st.isr if not gone(r))
    if not isr:
        isr = st.isr[:1]
    leader = st.leader
    if leader == NO_LEADER or gone(leader):
        leader = next((r for r in isr if not gone(r)), NO_LEADER)  # elect_leader on the new ISR
    return _changed(st, leader, isr)


def add_replica(st: PartitionState, broker_id: int, alive: Callable[[int], bool]) -> PartitionState:
    """A returning replica rejoins the ISR (kmeta has no logs, so it is caught up at once).

    This stands in for the leader's AlterPartition ISR expansion, so it needs a leader: an
    offline partition gets one only if the returning broker is in its ISR (no unclean
    election); once it has one, every live replica is in sync again.
    """
    leader = st.leader
    if leader == NO_LEADER:
        leader = elect_leader(st, alive)
        if leader == NO_LEADER:
            return st
    members = {r for r in st.isr if alive(r)} | {leader}
    if broker_id in st.replicas:
        members.add(broker_id)
    isr = tuple(r for r in st.replicas if r in members)
    return _changed(st, leader, isr)
