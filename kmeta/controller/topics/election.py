"""Leader election and ISR changes, as Kafka's ZooKeeper-mode controller makes them.

* A new leader is the ISR's first live member (Kafka's offlinePartitionLeaderElection); with
  none the partition goes offline (leader -1) and the ISR keeps its last member, as Kafka
  never shrinks it to empty. Unless the topic's ``unclean.leader.election.enable`` is true
  (default false): then the first live assigned replica leads and the ISR is that replica
  alone, and what the others had beyond it is lost (:func:`is_unclean` tells such a change).
* The controller never adds a replica to an ISR: the leader does, through AlterPartition,
  once the follower caught up (:mod:`kmeta.controller.topics.isr`). A returning replica only
  leads again an offline partition whose ISR it is in (a clean election).
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


def with_isr(st: PartitionRegistration, isr: tuple[int, ...]) -> PartitionRegistration:
    """An ISR-only change (a leader's AlterPartition): the partition epoch bumped, the leader
    epoch not (KRaft's PartitionChangeRecord). Equal results are one object, as elections'
    (a burst of 10k shrinks makes a few distinct states, each encoded once)."""
    new = tuple.__new__(
        PartitionRegistration, (st.replicas, isr, st.leader, st.leader_epoch, st.partition_epoch + 1)
    )
    shared = _SHARED.get(new)
    if shared is None:
        if len(_SHARED) >= 100_000:
            _SHARED.clear()
        shared = _SHARED[new] = new
    return shared


def unclean_allowed(configs: dict[str, str]) -> bool:
    """The topic's ``unclean.leader.election.enable`` (Kafka's default: false)."""
    return configs.get("unclean.leader.election.enable", "false").lower() == "true"


def is_unclean(old: PartitionRegistration, new: PartitionRegistration) -> bool:
    """``new`` has a leader that was not in ``old``'s ISR: an unclean election."""
    return new.leader >= 0 and new.leader != old.leader and new.leader not in old.isr


def _unclean_leader(
    st: PartitionRegistration, eligible: Callable[[int], bool]
) -> PartitionRegistration:
    """The first ``eligible`` assigned replica leads alone (Kafka's unclean election); the
    partition as it is when there is none."""
    leader = next((r for r in st.replicas if eligible(r)), NO_LEADER)
    return st if leader == NO_LEADER else _changed(st, leader, (leader,))


def remove_replicas(
    st: PartitionRegistration,
    gone: Callable[[int], bool],
    unclean: Callable[[int], bool] | None = None,
) -> PartitionRegistration:
    """Drop ``gone`` brokers from the ISR (never to empty) and re-elect if the leader went.

    ``unclean``: the topic allows unclean elections, and this tells the brokers that may lead
    (alive and not ``gone``) when no ISR member is left."""
    isr = tuple(r for r in st.isr if not gone(r))
    if not isr:
        isr = st.isr[:1]
    leader = st.leader
    if leader == NO_LEADER or gone(leader):
        leader = next((r for r in isr if not gone(r)), NO_LEADER)  # elect_leader on the new ISR
        if leader == NO_LEADER and unclean is not None:
            leader = next((r for r in st.replicas if unclean(r)), NO_LEADER)
            if leader != NO_LEADER:
                isr = (leader,)
    return _changed(st, leader, isr)


def add_replica(
    st: PartitionRegistration,
    broker_id: int,
    alive: Callable[[int], bool],
    unclean: bool = False,
) -> PartitionRegistration:
    """A replica returns: the ISR is unchanged (its leader adds it through AlterPartition once
    it caught up, as Kafka's). Only an offline partition changes: it is led again by its ISR's
    first live member (the returning broker if it is in the ISR: a clean election), else, if
    the topic allows it (``unclean``), by the first live replica alone (Kafka's
    handleBrokerUnfenced elects the partitions without a leader)."""
    if st.leader != NO_LEADER and alive(st.leader):
        return st
    leader = elect_leader(st, alive)
    if leader != NO_LEADER:
        return _changed(st, leader, st.isr)
    if unclean and broker_id in st.replicas:
        return _unclean_leader(st, alive)
    return st


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
