"""ReassignmentManager: partition reassignments as Kafka's ZooKeeper-mode controller runs them.

Kafka's vocabulary (``KafkaController.onPartitionReassignment``): RS is the partition's
replica set, ORS the original, TRS the target, AR = TRS - ORS the replicas being added,
RR = ORS - TRS those being removed. While a reassignment runs, RS = TRS + ORS (target first,
in the target's order, then the rest of the original: ``ReplicaAssignment.reassignTo``) and
Metadata shows that union as the replicas; AR and RR are kept beside the partition state
(in memory and in the store's ``reassignments`` table) and listed by
ListPartitionReassignments.

Phases, each one controller event, each committed before its requests go out:

* U + A (AlterPartitionReassignments): RS = TRS + ORS, AR, RR written; replicas of an earlier
  reassignment that the new one no longer needs get StopReplica(delete) and leave the ISR;
  LeaderAndIsr (leader epoch bumped) to RS, AR as new replicas, UpdateMetadata to every live
  broker. A target that needs no new replica in the ISR completes at once (phase B).
* Catch-up: the adding replicas fetch from the leader, which adds each to the ISR through
  AlterPartition once it caught up (:mod:`kmeta.controller.topics.isr`); the event that
  commits an ISR holding the whole target completes the reassignment (Kafka's
  isReassignmentComplete, checked on every ISR change). A dead adding replica catches up
  once its broker registers again.
* B (TRS in the ISR): RS = TRS, RR leaves the ISR; if the leader is not in TRS (or is dead)
  the first live TRS replica in the ISR leads (Kafka's reassignPartitionLeaderElection);
  LeaderAndIsr to TRS, UpdateMetadata to every live broker, StopReplica(delete) to RR; AR and
  RR are cleared in the store.
* Cancel (null target): a reassignment to ORS, so the same phases revert it: the adding
  replicas are stopped and the original set is restored (in TRS + ORS order, as Kafka).

A restarted controller reads AR and RR back and completes at once those whose target is all
in the ISR; the others wait for their leaders' AlterPartition. A returning broker may be the
TRS replica that can lead a completion which found none: its registration checks again. Errors as Kafka's: UNKNOWN_TOPIC_OR_PARTITION (also for a topic being deleted),
NO_REASSIGNMENT_IN_PROGRESS (cancel without one), INVALID_REPLICA_ASSIGNMENT (empty,
duplicate or negative ids, or an adding replica on a broker that is not alive).
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from kmeta.controller.channel.barrier import Barrier
from kmeta.controller.channel.request_batch import ControllerRequests
from kmeta.controller.host import ControllerHost
from kmeta.controller.model import PartitionRegistration
from kmeta.controller.topics.election import reassign_election, with_replicas
from kmeta.metadata.model import NO_LEADER, TopicPartitionKey
from kmeta.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

#: (topic, partition, error code, error message) per partition, in request order
AlterResult = tuple[str, int, int, str | None]
_UNKNOWN = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
#: stop_replica entries, as ControllerRequests takes them
StopReplicas = list[tuple[list[int], TopicPartitionKey, bool]]


class Reassignment(NamedTuple):
    """AR and RR of a partition whose replica set (RS) is in its PartitionRegistration."""

    topic_id: uuid.UUID  # the topic it belongs to (a re-created name is another topic)
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    def origin(self, replicas: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(r for r in replicas if r not in self.adding)

    def target(self, replicas: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(r for r in replicas if r not in self.removing)


def reassign_to(
    replicas: tuple[int, ...], current: Reassignment | None, target: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Kafka's ``ReplicaAssignment.reassignTo``: (RS = TRS + ORS, AR, RR)."""
    origin = current.origin(replicas) if current is not None else replicas
    full = tuple(dict.fromkeys((*target, *origin)))
    return (
        full,
        tuple(r for r in full if r not in origin),
        tuple(r for r in full if r not in target),
    )


def invalid_target(target: tuple[int, ...]) -> str | None:
    """Kafka's validateReplicas, but for liveness (checked against the new AR)."""
    if not target:
        return "Empty replica list specified in partition reassignment."
    if len(set(target)) != len(target):
        return f"Duplicate replica ids in partition reassignment replica list: {list(target)}"
    if any(r < 0 for r in target):
        return f"Invalid broker id in replica list: {list(target)}"
    return None


class _Current(Mapping[TopicPartitionKey, Reassignment]):
    """The reassignments whose topic still exists as it was (what the request batch reads)."""

    def __init__(
        self,
        ongoing: Mapping[TopicPartitionKey, Reassignment],
        current_of: Callable[[TopicPartitionKey], Reassignment | None],
    ) -> None:
        self._ongoing = ongoing
        self._current_of = current_of

    def __getitem__(self, tp: TopicPartitionKey) -> Reassignment:
        r = self._current_of(tp)
        if r is None:
            raise KeyError(tp)
        return r

    def get(self, tp: TopicPartitionKey, default: Any = None) -> Any:
        """A dict lookup first: the batch asks for every partition it sends (100k on a resync)."""
        if tp not in self._ongoing:
            return default
        r = self._current_of(tp)
        return default if r is None else r

    def __len__(self) -> int:
        return len(self._ongoing)

    def __iter__(self) -> Iterator[TopicPartitionKey]:
        return iter([tp for tp in self._ongoing if self._current_of(tp) is not None])


def step_a(st: PartitionRegistration, full: tuple[int, ...]) -> PartitionRegistration:
    """A1: RS = TRS + ORS, the ISR in its order (replicas no longer in RS leave it), the
    leader kept if still a replica (else the first ISR member), leader epoch bumped."""
    isr = tuple(r for r in full if r in st.isr) or full[:1]
    leader = st.leader if st.leader in full else next(iter(isr), NO_LEADER)
    if leader not in full:
        leader = NO_LEADER
    return with_replicas(st, full, isr, leader)


def step_b(
    st: PartitionRegistration, target: tuple[int, ...], alive: Callable[[int], bool]
) -> PartitionRegistration | None:
    """B2-B4: RS = TRS, RR out of the ISR, a TRS leader; None if no TRS replica can lead."""
    leader = st.leader
    if leader not in target or not alive(leader):
        leader = reassign_election(st, target, alive)
        if leader == NO_LEADER:
            return None
    isr = tuple(x for x in target if x in st.isr)
    return with_replicas(st, target, isr, leader)


class ReassignmentManager:
    def __init__(self, host: ControllerHost) -> None:
        self.host = host
        self.ongoing: dict[TopicPartitionKey, Reassignment] = {}
        #: ``ongoing`` without the reassignments of deleted (or re-created) topics
        self.current: Mapping[TopicPartitionKey, Reassignment] = _Current(
            self.ongoing, self._current
        )

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Controller start: read AR/RR back."""
        self._load()

    def resume(self) -> None:
        """The controller is active (its Startup event done, so the brokers have channels):
        those whose target is all in the ISR already complete, in an event."""
        if self.ongoing:
            log.info("resuming %d partition reassignment(s)", len(self.ongoing))
            self._check(list(self.ongoing))

    def _load(self) -> None:
        state = self.host.state
        self.ongoing.clear()
        for (topic, p), (adding, removing) in self.host.store.load_reassignments().items():
            info = state.topics.get(topic)
            if info is not None and p in info.partitions:
                self.ongoing[(topic, p)] = Reassignment(info.topic_id, adding, removing)

    def reloaded(self) -> None:
        """The controller reloaded its state after a refused commit: so do we (a reassignment
        that was not kept is forgotten, one whose completion was not kept is retried)."""
        self._load()
        self._check(list(self.ongoing))

    async def stop(self) -> None:
        """Nothing runs between events (kept for the controller's stop sequence)."""

    def broker_registered(self, broker_id: int) -> None:
        """A returning broker may be the TRS replica a complete reassignment needs to lead."""
        state = self.host.state
        waiting = [
            tp
            for tp in self.ongoing
            if self._current(tp) is not None and broker_id in state.partition(tp).replicas
        ]
        self._check(waiting)

    # -- AlterPartitionReassignments --------------------------------------------------------
    def alter(
        self, entries: list[tuple[str, int, tuple[int, ...] | None]], forwarder: int | None
    ) -> tuple[list[AlterResult], Barrier | None]:
        """The AlterPartitionReassignments event: a result per entry, and the barrier of the
        first step (every live broker has RS = TRS + ORS, or the final RS)."""
        host = self.host
        state = host.state
        alive = set(state.live_broker_ids())
        results: list[AlterResult] = []
        changed: dict[TopicPartitionKey, PartitionRegistration] = {}
        new_replicas: list[tuple[tuple[int, ...], TopicPartitionKey, bool]] = []
        stops: list[tuple[list[int], TopicPartitionKey, bool]] = []
        #: the outcome per partition (a partition listed twice: the last entry's)
        started: dict[TopicPartitionKey, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        finished: list[TopicPartitionKey] = []
        with host.store.transaction():
            for topic, p, target in entries:
                tp = (topic, p)
                info = state.topics.get(topic)
                if info is None or p not in info.partitions or topic in state.deleting:
                    results.append((topic, p, *_UNKNOWN))
                    continue
                st = state.partition(tp)
                current = self._current(tp)
                if target is None:
                    if current is None:
                        results.append((topic, p, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None))
                        continue
                    target = current.origin(st.replicas)
                why = invalid_target(target)
                full, adding, removing = reassign_to(st.replicas, current, target)
                if why is None and not alive.issuperset(adding):
                    why = (
                        "Replica assignment has brokers that are not alive. Replica list: "
                        f"{list(adding)}, live broker list: {sorted(alive)}"
                    )
                if why is not None:
                    results.append((topic, p, ErrorCode.INVALID_REPLICA_ASSIGNMENT, why))
                    continue
                # U3: replicas an earlier reassignment was adding that this one drops
                unneeded = [r for r in st.replicas if r not in full]
                stops += [([r], tp, True) for r in unneeded]
                # Kafka's isReassignmentComplete: nothing to move, or TRS already in the ISR
                now = (not adding and not removing) or set(target).issubset(st.isr)
                new = step_b(st, target, alive.__contains__) if now else None
                if new is not None:  # phase B at once: RR get StopReplica
                    self.ongoing.pop(tp, None)
                    started.pop(tp, None)
                    finished.append(tp)
                    stops += [([r], tp, True) for r in removing]
                else:  # phase A (also when no TRS replica can lead yet)
                    new = step_a(st, full)
                    if adding or removing:
                        self.ongoing[tp] = Reassignment(info.topic_id, adding, removing)
                        started[tp] = (adding, removing)
                changed[tp] = new
                # LeaderAndIsr: the adding replicas as new ones (Kafka's isNew), the others not
                old = tuple(r for r in new.replicas if r not in adding)
                new_replicas.append((old, tp, False))
                if adding and new.replicas != old:
                    new_replicas.append((adding, tp, True))
                results.append((topic, p, 0, None))
                log.debug(
                    "reassigning %s-%d to %s: replicas %s, adding %s, removing %s",
                    topic, p, list(target), list(new.replicas), list(adding), list(removing),
                )  # fmt: skip
            host.store.delete_reassignments(tp for tp in finished if tp not in started)
            host.store.put_reassignments((*tp, a, r) for tp, (a, r) in started.items())
            host.persist_partitions(changed)
        if changed:
            log.info(
                "partition reassignment: %d started, %d completed at once",
                len(started),
                len(finished),
            )
        if not changed and not stops:
            return results, None
        barrier = Barrier(host.barriers)
        targets = host.send(
            ControllerRequests(
                update_metadata_to=state.live_broker_ids(),
                update_metadata_partitions=changed,
                leader_and_isr=new_replicas,
                stop_replica=stops,
            ),
            barrier=barrier,
        )
        return results, barrier.arm(host.propagation_targets(targets, forwarder))

    # -- ListPartitionReassignments ---------------------------------------------------------
    def in_progress(
        self, asked: Iterable[TopicPartitionKey] | None
    ) -> list[tuple[TopicPartitionKey, tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        """(partition, RS, AR, RR) of the reassignments in progress among ``asked`` (all)."""
        out = []
        for tp in sorted(self.ongoing) if asked is None else dict.fromkeys(asked):
            r = self._current(tp)
            if r is not None:
                out.append((tp, self.host.state.partition(tp).replicas, r.adding, r.removing))
        return out

    # -- catch-up and completion ------------------------------------------------------------
    def _current(self, tp: TopicPartitionKey) -> Reassignment | None:
        """The reassignment of ``tp`` if its topic still exists as it was (not deleted, not
        being deleted, not re-created under the same name)."""
        r = self.ongoing.get(tp)
        if r is None:
            return None
        state = self.host.state
        info = state.topics.get(tp[0])
        if info is None or info.topic_id != r.topic_id or tp[0] in state.deleting:
            return None
        return r if tp[1] in info.partitions else None

    def _forget(self, tps: Iterable[TopicPartitionKey]) -> None:
        """Drop the reassignments of ``tps`` (inside the caller's transaction)."""
        gone = [tp for tp in tps if self.ongoing.pop(tp, None) is not None]
        if gone:
            self.host.store.delete_reassignments(gone)

    def _check(self, tps: list[TopicPartitionKey]) -> None:
        """Complete, in an event of their own, those of ``tps`` whose target is in the ISR."""
        if tps:
            self.host.enqueue(
                "PartitionReassignmentIsrChange", functools.partial(self.complete, tps)
            )

    def completed(
        self, tps: Iterable[TopicPartitionKey]
    ) -> tuple[dict[TopicPartitionKey, PartitionRegistration], StopReplicas]:
        """Phase B for those of ``tps`` reassigning whose whole target is in the ISR and has a
        replica that can lead, inside the caller's transaction (an ISR change's event: Kafka
        checks isReassignmentComplete on every one): their new states, persisted, and the
        StopReplica(delete) of their RR. Those of deleted topics are forgotten."""
        state = self.host.state
        alive = set(state.live_broker_ids()).__contains__
        complete: dict[TopicPartitionKey, PartitionRegistration] = {}
        stops: StopReplicas = []
        gone: list[TopicPartitionKey] = []
        for tp in tps:
            if tp not in self.ongoing:
                continue
            r = self._current(tp)
            if r is None:
                gone.append(tp)  # its topic went (deleted, or being deleted)
                continue
            st = state.partition(tp)
            target = r.target(st.replicas)
            if not set(target).issubset(st.isr):
                continue  # waits for the leader's AlterPartition
            new = step_b(st, target, alive)
            if new is None:
                continue  # no TRS replica can lead: waits for a registration
            complete[tp] = new
            stops += [([x], tp, True) for x in r.removing]
        self.host.persist_partitions(complete)
        self._forget([*gone, *complete])
        if complete:
            log.info("completed %d partition reassignment(s)", len(complete))
        return complete, stops

    def complete(self, tps: list[TopicPartitionKey]) -> list[TopicPartitionKey]:
        """An event completing those of ``tps`` that can (:meth:`completed`), sent. Returns
        those."""
        host = self.host
        with host.store.transaction():
            complete, stops = self.completed(tps)
        if complete:
            host.send(
                ControllerRequests(
                    update_metadata_to=host.state.live_broker_ids(),
                    update_metadata_partitions=complete,
                    leader_and_isr=[(st.replicas, tp, False) for tp, st in complete.items()],
                    stop_replica=stops,
                ),
            )
        return list(complete)
