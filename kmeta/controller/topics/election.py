"""Leader election and ISR changes, as Kafka's ZooKeeper-mode controller makes them.

* Never unclean: a new leader always comes from the ISR; with no live ISR member the partition
  goes offline (leader -1) and the ISR keeps its last member, as Kafka never shrinks it to empty.
* Every controller-made change bumps the leader epoch (ZooKeeper mode does so for ISR shrinks
  too) and the partition epoch.
"""

from __future__ import annotations

from collections.abc import Callable

from kmeta.controller.model import PartitionRegistration
from kmeta.metadata.model import NO_LEADER


def elect_leader(st: PartitionRegistration, eligible: Callable[[int], bool]) -> int:
    """First replica in ISR order that is ``eligible``, else -1 (no unclean election)."""
    for r in st.isr:
        if eligible(r):
            return r
    return NO_LEADER


#: equal partition states made by elections, as one object each (bounded: cleared when full)
_SHARED: dict[PartitionRegistration, PartitionRegistration] = {}


def _changed(st: PartitionRegistration, leader: int, isr: tuple[int, ...]) -> PartitionRegistration:
    if leader == st.leader and isr == st.isr:
        return st
    # tuple.__new__: NamedTuple's _replace is slow Python, and a resync changes 100k of these
    new = tuple.__new__(
        PartitionRegistration,
        (st.replicas, isr, leader, st.leader_epoch + 1, st.partition_epoch + 1),
    )
    # States are immutable and replaced whole, so equal ones can be one object: a fencing
    # at 1M partitions makes a few distinct ones, not 1M (memory, and the cyclic GC's passes)
    shared = _SHARED.get(new)
    if shared is None:
        if len(_SHARED) >= 100_000:
            _SHARED.clear()
        shared = _SHARED[new] = new
    return shared


def remove_replicas(
    st: PartitionRegistration, gone: Callable[[int], bool]
) -> PartitionRegistration:
    """Drop ``gone`` brokers from the ISR (never to empty) and re-elect if the leader went."""
    isr = tuple(r for r in st.isr if not gone(r))
    if not isr:
        isr = st.isr[:1]
    leader = st.leader
    if leader == NO_LEADER or gone(leader):
        leader = next((r for r in isr if not gone(r)), NO_LEADER)  # elect_leader on the new ISR
    return _changed(st, leader, isr)


def add_replica(
    st: PartitionRegistration, broker_id: int, alive: Callable[[int], bool]
) -> PartitionRegistration:
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


# -- elections an admin asks for (Kafka's PartitionLeaderElectionAlgorithms) --------------------
def preferred_replica_election(
    st: PartitionRegistration, alive: Callable[[int], bool]
) -> PartitionRegistration | None:
    """The first assigned replica leads if it is live and in the ISR; else None (Kafka's
    preferredReplicaPartitionLeaderElection). The ISR is unchanged."""
    preferred = st.replicas[0] if st.replicas else NO_LEADER
    if preferred == NO_LEADER or not alive(preferred) or preferred not in st.isr:
        return None
    return _changed(st, preferred, st.isr)


def unclean_election(
    st: PartitionRegistration, alive: Callable[[int], bool]
) -> PartitionRegistration | None:
    """Kafka's offlinePartitionLeaderElection with unclean election allowed: the first live
    assigned replica in the ISR, else the first live assigned replica at all (its ISR is then
    just itself: the others' data may be ahead of it). None: no live replica."""
    leader = next((r for r in st.replicas if alive(r) and r in st.isr), NO_LEADER)
    if leader != NO_LEADER:
        return _changed(st, leader, tuple(r for r in st.isr if alive(r)))
    leader = next((r for r in st.replicas if alive(r)), NO_LEADER)
    if leader == NO_LEADER:
        return None
    return _changed(st, leader, (leader,))


def reassign_election(
    st: PartitionRegistration, target: tuple[int, ...], alive: Callable[[int], bool]
) -> int:
    """The first target replica that is live and in the ISR (Kafka's
    reassignPartitionLeaderElection), else -1."""
    return next((r for r in target if alive(r) and r in st.isr), NO_LEADER)


def with_replicas(
    st: PartitionRegistration, replicas: tuple[int, ...], isr: tuple[int, ...], leader: int
) -> PartitionRegistration:
    """A new replica set (a reassignment step): epochs bumped, as Kafka's controller does for
    every LeaderAndIsr it sends with a changed assignment."""
    return tuple.__new__(
        PartitionRegistration, (replicas, isr, leader, st.leader_epoch + 1, st.partition_epoch + 1)
    )
