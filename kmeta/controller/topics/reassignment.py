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
* Catch-up: there is no data to copy, so ``reassignment_catch_up_ms`` after phase A each live
  adding replica joins the ISR (the leader's AlterPartition, in Kafka), sent as its own step.
  A dead adding replica joins when its broker registers again (the wait is re-armed then).
* B (TRS in the ISR): RS = TRS, RR leaves the ISR; if the leader is not in TRS (or is dead)
  the first live TRS replica in the ISR leads (Kafka's reassignPartitionLeaderElection);
  LeaderAndIsr to TRS, UpdateMetadata to every live broker, StopReplica(delete) to RR; AR and
  RR are cleared in the store.
* Cancel (null target): a reassignment to ORS, so the same phases revert it: the adding
  replicas are stopped and the original set is restored (in TRS + ORS order, as Kafka).

A restarted controller reads AR and RR back and resumes every reassignment in progress from
the catch-up. Errors as Kafka's: UNKNOWN_TOPIC_OR_PARTITION (also for a topic being deleted),
NO_REASSIGNMENT_IN_PROGRESS (cancel without one), INVALID_REPLICA_ASSIGNMENT (empty,
duplicate or negative ids, or an adding replica on a broker that is not alive).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
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


class CatchUpTimer:
    """When each reassigning partition's adding replicas count as caught up.

    Stands in for the leaders' AlterPartition (ISR expansion) Kafka's controller waits for:
    there is no data to copy here, so a partition is due a fixed delay after it was armed.
    One task sleeps until the earliest due time (or a new arming) and hands every partition
    then due to ``on_due`` at once; a failure there is logged and the loop goes on, since the
    next registration of an adding replica re-arms its partitions.
    """

    def __init__(self, on_due: Callable[[list[TopicPartitionKey]], Awaitable[object]]) -> None:
        self._on_due = on_due
        self._due: dict[TopicPartitionKey, float] = {}  # partition -> when (monotonic)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def __contains__(self, tp: object) -> bool:
        return tp in self._due

    def arm(self, tps: Iterable[TopicPartitionKey], delay_s: float) -> None:
        when = time.monotonic() + delay_s
        for tp in tps:
            self._due[tp] = when
        self._wake.set()

    def disarm(self, tps: Iterable[TopicPartitionKey]) -> None:
        for tp in tps:
            self._due.pop(tp, None)

    def keep_only(self, tps: Mapping[TopicPartitionKey, object]) -> None:
        self._due = {tp: when for tp, when in self._due.items() if tp in tps}

    async def _loop(self) -> None:
        while True:
            now = time.monotonic()
            if not self._due or min(self._due.values()) > now:
                delay = min(self._due.values()) - now if self._due else None
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wake.wait()
                continue
            due = [tp for tp, when in self._due.items() if when <= now]
            for tp in due:
                del self._due[tp]
            try:
                await self._on_due(due)
            except Exception:  # (the event manager logged it; the next registration re-arms)
                log.exception("reassignment catch-up of %d partition(s) failed", len(due))


class ReassignmentManager:
    def __init__(self, host: ControllerHost) -> None:
        self.host = host
        self.ongoing: dict[TopicPartitionKey, Reassignment] = {}
        #: ``ongoing`` without the reassignments of deleted (or re-created) topics
        self.current: Mapping[TopicPartitionKey, Reassignment] = _Current(
            self.ongoing, self._current
        )
        #: partitions waiting for their adding replicas to catch up
        self._catch_up = CatchUpTimer(self._enqueue_caught_up)

    @property
    def _catch_up_s(self) -> float:
        return self.host.config.reassignment_catch_up_ms / 1000.0

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Controller start: read AR/RR back and resume every reassignment from the catch-up."""
        self._load()
        if self.ongoing:
            log.info("resuming %d partition reassignment(s)", len(self.ongoing))
            self._arm(self.ongoing)
        self._catch_up.start()

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
        self._catch_up.keep_only(self.ongoing)
        self._arm(tp for tp in self.ongoing if tp not in self._catch_up)

    async def stop(self) -> None:
        await self._catch_up.stop()

    def broker_registered(self, broker_id: int) -> None:
        """A returning broker may be the adding replica a reassignment waits for."""
        state = self.host.state
        waiting = [
            tp
            for tp in self.ongoing
            if self._current(tp) is not None and broker_id in state.partition(tp).replicas
        ]
        self._arm(waiting)

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
        self._catch_up.disarm(finished)
        self._arm(started)
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
        self._catch_up.disarm(tps)
        if gone:
            self.host.store.delete_reassignments(gone)

    def _arm(self, tps: Iterable[TopicPartitionKey]) -> None:
        self._catch_up.arm(tps, self._catch_up_s)

    async def _enqueue_caught_up(self, due: list[TopicPartitionKey]) -> None:
        await self.host.enqueue(
            "PartitionReassignmentIsrChange", functools.partial(self.caught_up, due)
        )

    def caught_up(self, tps: list[TopicPartitionKey]) -> list[TopicPartitionKey]:
        """The catch-up event: live adding replicas join the ISR (one step, sent), then the
        partitions whose whole target is in the ISR complete (phase B, sent). Returns those."""
        host = self.host
        state = host.state
        alive = set(state.live_broker_ids()).__contains__
        expanded: dict[TopicPartitionKey, PartitionRegistration] = {}
        complete: dict[TopicPartitionKey, PartitionRegistration] = {}
        stops: list[tuple[list[int], TopicPartitionKey, bool]] = []
        gone: list[TopicPartitionKey] = []
        with host.store.transaction():
            for tp in tps:
                r = self._current(tp)
                if r is None:
                    gone.append(tp)  # its topic went (deleted, or being deleted)
                    continue
                st = state.partition(tp)
                if st.leader == NO_LEADER or not alive(st.leader):
                    continue  # no leader to expand the ISR: waits for a registration
                isr = tuple(x for x in st.replicas if x in st.isr or (x in r.adding and alive(x)))
                if isr != st.isr:  # the leader's ISR expansion: partition epoch only
                    st = st._replace(isr=isr, partition_epoch=st.partition_epoch + 1)
                    expanded[tp] = st
                if not set(r.target(st.replicas)).issubset(isr):
                    continue  # an adding replica is down: waits for its registration
                new = step_b(st, r.target(st.replicas), alive)
                if new is None:
                    continue
                complete[tp] = new
                stops += [([x], tp, True) for x in r.removing]
            host.persist_partitions(expanded)
            self._forget([*gone, *complete])
        if expanded:
            host.send(
                ControllerRequests(
                    update_metadata_to=state.live_broker_ids(),
                    update_metadata_partitions=expanded,
                    leader_and_isr=[(st.replicas, tp, False) for tp, st in expanded.items()],
                ),
            )
        if complete:
            with host.store.transaction():
                host.persist_partitions(complete)
            host.send(
                ControllerRequests(
                    update_metadata_to=state.live_broker_ids(),
                    update_metadata_partitions=complete,
                    leader_and_isr=[(st.replicas, tp, False) for tp, st in complete.items()],
                    stop_replica=stops,
                ),
            )
            log.info("completed %d partition reassignment(s)", len(complete))
        return list(complete)
