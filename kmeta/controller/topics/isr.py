"""IsrManager: the ISR changes partition leaders ask for (AlterPartition, KIP-497).

A leader shrinks its partition's ISR when a follower falls behind (``replica.lag.time.max.ms``)
and expands it when one caught up to the high watermark; it asks the controller, which makes
the change durable and tells every broker. As Kafka's KRaft controller
(``ReplicationControlManager.alterPartition``), with the ZooKeeper-mode controller's error
names where they differ:

* The whole request: a sender that is not registered, is fenced, or names another broker
  epoch is answered STALE_BROKER_EPOCH and nothing changes.
* Each topic: by name up to v1 (unknown: UNKNOWN_TOPIC_OR_PARTITION), by id from v2 (unknown:
  UNKNOWN_TOPIC_ID); a topic being deleted counts as unknown.
* Each partition, checked in Kafka's order: unknown: UNKNOWN_TOPIC_OR_PARTITION; a leader or
  partition epoch above ours: NOT_CONTROLLER (the sender heard of a newer controller); a
  leader epoch below ours: FENCED_LEADER_EPOCH; a sender that is not the leader:
  NOT_LEADER_OR_FOLLOWER (ZooKeeper mode's name; KRaft says INVALID_REQUEST); a partition
  epoch below ours: INVALID_UPDATE_VERSION; an empty ISR, one naming a broker twice, or one
  without the leader: INVALID_REQUEST, as is LeaderRecoveryState RECOVERING (kmeta's
  partitions are always RECOVERED); a member that is not a replica, not registered, fenced,
  or (v3) on another broker epoch: INELIGIBLE_REPLICA (OPERATION_NOT_ATTEMPTED before v2).
* A valid change: the ISR (kept in replica order) and the partition epoch bumped, the leader
  epoch unchanged (KRaft's PartitionChangeRecord for an ISR-only change); an ISR already as
  asked is answered as it is, unchanged. A reassigning partition whose whole target is in
  the new ISR completes in the same event (phase B of
  :mod:`kmeta.controller.topics.reassignment`); if that moved the leadership away from the
  sender its answer is NEW_LEADER_ELECTED.
* The whole request is one controller event and one commit (a burst of shrinks after a broker
  stalls is one request per leader carrying all its partitions, as Kafka's
  AlterPartitionManager batches them); the changes are answered only once durable, and
  pushed then as Kafka's ZooKeeper-mode controller does: UpdateMetadata to every live broker
  (the leader knows the new ISR from its answer; a LeaderAndIsr carrying the leader epoch the
  replicas already hold would be refused as stale), LeaderAndIsr only to the replicas of a
  partition whose reassignment completed with it (its leader epoch moved).
* Every committed change is counted (:class:`~kmeta.controller.metrics.ControllerMetrics`'s
  ``kmeta_controller_isr_changes_total``, and /status) and written to the state-change log
  (an ``isr`` line per event: the topics, the partitions changed, the shrinks and expands).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

from kmeta.controller.channel.request_batch import ControllerRequests
from kmeta.controller.host import ControllerHost
from kmeta.controller.model import PartitionRegistration, TopicInfo
from kmeta.controller.topics.election import with_isr
from kmeta.metadata.model import TopicPartitionKey
from kmeta.net.state_change_log import StateChangeLog
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import alter_partition as ap

log = logging.getLogger(__name__)

#: LeaderRecoveryState: RECOVERED (0), RECOVERING (1, after an unclean election, KIP-704)
RECOVERED = 0

#: (partition index, error code, the partition as it is now for an answer without error)
PartitionOutcome = tuple[int, int, PartitionRegistration | None]
#: stop_replica entries, as ControllerRequests takes them
StopReplicas = list[tuple[list[int], TopicPartitionKey, bool]]


class TopicOutcome(NamedTuple):
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionOutcome]


class _Outcome(NamedTuple):
    """One partition's check and new state (``new``; ``st`` itself if unchanged)."""

    st: PartitionRegistration | None  # the state it was computed for
    error: int
    new: PartitionRegistration | None
    shrink: bool
    expand: bool


class ReassignmentCompleter(Protocol):
    def completed(
        self, tps: Iterable[TopicPartitionKey]
    ) -> tuple[dict[TopicPartitionKey, PartitionRegistration], StopReplicas]:
        """Phase B of the reassignments among ``tps`` whose target is all in the ISR, inside
        the caller's transaction: the new states (persisted) and the StopReplicas to send."""


class IsrManager:
    def __init__(
        self, host: ControllerHost, reassignments: ReassignmentCompleter, state_log: StateChangeLog
    ) -> None:
        self.host = host
        self.reassignments = reassignments
        self.state_log = state_log
        #: ISR changes committed since this controller started (for /status)
        self.shrinks = 0
        self.expands = 0
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._rebuilt = False
        self._eligible_seen: dict[tuple[tuple[tuple[int, int], ...], tuple[int, ...]], bool] = {}

    def alter_partition(
        self, request: ap.AlterPartitionRequest
    ) -> tuple[int, list[TopicOutcome]]:
        """The AlterPartition event: (top-level error, the outcome per topic entry)."""
        host = self.host
        state = host.state
        broker = state.brokers.get(request.broker_id)
        if broker is None or not broker.alive or broker.epoch != request.broker_epoch:
            self._refused(ErrorCode.STALE_BROKER_EPOCH, 1)
            return ErrorCode.STALE_BROKER_EPOCH, []
        self._rebuilt = False
        self._eligible_seen.clear()  # (brokers' liveness and epochs as they are in this event)
        changed: dict[TopicPartitionKey, PartitionRegistration] = {}
        outcomes: list[TopicOutcome] = []
        refused: dict[int, int] = {}  # error -> partitions
        shrinks = expands = 0
        # A burst names many partitions in equal states (shared objects) with equal asks:
        # each distinct (state, ask) is checked once. (The state is kept in the value: its
        # id is only unique while it lives.)
        memo: dict[tuple[int, tuple[object, ...]], _Outcome] = {}
        for t in request.topics:
            info = self._topic(t.topic_id) if request.version >= 2 else state.topics.get(t.topic_name)
            if info is None or info.name in state.deleting:
                unknown = (
                    ErrorCode.UNKNOWN_TOPIC_ID
                    if request.version >= 2
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                parts: list[PartitionOutcome] = [
                    (p.partition_index, int(unknown), None) for p in t.partitions
                ]
                refused[unknown] = refused.get(unknown, 0) + len(parts)
                outcomes.append(TopicOutcome(t.topic_name, t.topic_id, parts))
                continue
            results: list[PartitionOutcome] = []
            held = info.partitions
            for p in t.partitions:
                index = p.partition_index
                tp = (info.name, index)
                st = changed.get(tp) or held.get(index)
                key = (id(st), p[1:])
                hit = memo.get(key)
                if hit is None or hit.st is not st:
                    hit = memo[key] = self._outcome(request, p, st)
                new = hit.new
                if new is None:  # (refused)
                    refused[hit.error] = refused.get(hit.error, 0) + 1
                    results.append((index, hit.error, None))
                    continue
                if new is not st:
                    changed[tp] = new
                    shrinks += hit.shrink
                    expands += hit.expand
                results.append((index, 0, new))
            outcomes.append(TopicOutcome(info.name, info.topic_id, results))
        for error, count in refused.items():
            self._refused(error, count)
        if not changed:
            return 0, outcomes
        with host.store.transaction():
            host.persist_partitions(changed)
            done, stops = self.reassignments.completed(changed)
        changed.update(done)
        if done:  # the answers carry the partitions as they are now
            outcomes = [_after(o, done, request.broker_id) for o in outcomes]
        # UpdateMetadata to every live broker (Kafka's ZooKeeper-mode controller sends only
        # that for an ISR change: the leader has its answer, and a follower's LeaderAndIsr
        # with the leader epoch it holds would be refused as stale); LeaderAndIsr for the
        # partitions whose completed reassignment changed their replicas and leader
        host.send(
            ControllerRequests(
                update_metadata_to=state.live_broker_ids(),
                update_metadata_partitions=changed,
                leader_and_isr=[(st.replicas, tp, False) for tp, st in done.items()],
                stop_replica=stops,
            ),
        )
        self._committed(request.broker_id, changed, shrinks, expands)
        return 0, outcomes

    def _topic(self, topic_id: uuid.UUID) -> TopicInfo | None:
        """The topic of ``topic_id``: from an index kept across events, rebuilt (at most once
        an event: a request of unknown ids costs one pass) when it misses or is stale."""
        topics = self.host.state.topics
        info = self._by_id.get(topic_id)
        if (info is None or topics.get(info.name) is not info) and not self._rebuilt:
            self._rebuilt = True
            self._by_id = {t.topic_id: t for t in topics.values()}
            info = self._by_id.get(topic_id)
        return info if info is not None and topics.get(info.name) is info else None

    def _outcome(
        self, request: ap.AlterPartitionRequest, p: ap.PartitionData, st: PartitionRegistration | None
    ) -> _Outcome:
        error = self._check(request, p, st)
        if error or st is None:
            return _Outcome(st, error or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, False, False)
        members = set(_isr_of(request.version, p))
        isr = tuple(r for r in st.replicas if r in members)
        if isr == st.isr:
            return _Outcome(st, 0, st, False, False)
        shrink = any(r not in members for r in st.isr)
        expand = any(r not in st.isr for r in isr)
        return _Outcome(st, 0, with_isr(st, isr), shrink, expand)

    def _check(
        self, request: ap.AlterPartitionRequest, p: ap.PartitionData, st: PartitionRegistration | None
    ) -> int:
        if st is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if p.leader_epoch > st.leader_epoch or p.partition_epoch > st.partition_epoch:
            return ErrorCode.NOT_CONTROLLER
        if p.leader_epoch < st.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if request.broker_id != st.leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if p.partition_epoch < st.partition_epoch:
            return int(ErrorCode.INVALID_UPDATE_VERSION)
        isr = _isr_of(request.version, p)
        if not isr or len(set(isr)) != len(isr) or st.leader not in isr:
            return ErrorCode.INVALID_REQUEST
        if request.version >= 1 and p.leader_recovery_state != RECOVERED:
            return ErrorCode.INVALID_REQUEST
        if not self._eligible(request.version, p, st):
            if request.version >= 2:
                return ErrorCode.INELIGIBLE_REPLICA
            return ErrorCode.OPERATION_NOT_ATTEMPTED
        return ErrorCode.NONE

    def _eligible(
        self, version: int, p: ap.PartitionData, st: PartitionRegistration
    ) -> bool:
        members: tuple[tuple[int, int], ...] = (
            tuple((b.broker_id, b.broker_epoch) for b in p.new_isr_with_epochs)
            if version >= 3
            else tuple((b, -1) for b in p.new_isr)
        )
        # (a burst names a few distinct ISRs for many partitions: each checked once)
        key = (members, st.replicas)
        known = self._eligible_seen.get(key)
        if known is None:
            known = self._eligible_seen[key] = self._members_eligible(members, st.replicas)
        return known

    def _members_eligible(
        self, members: tuple[tuple[int, int], ...], replicas: tuple[int, ...]
    ) -> bool:
        brokers = self.host.state.brokers
        for broker_id, epoch in members:
            info = brokers.get(broker_id)
            if broker_id not in replicas or info is None or not info.alive:
                return False
            if epoch != -1 and epoch != info.epoch:
                return False
        return True

    def _refused(self, error: int, count: int) -> None:
        if count:
            self.host.metrics.alter_partition_errors.labels(ErrorCode(error).name).inc(count)

    def _committed(
        self,
        sender: int,
        changed: dict[TopicPartitionKey, PartitionRegistration],
        shrinks: int,
        expands: int,
    ) -> None:
        self.shrinks += shrinks
        self.expands += expands
        metrics = self.host.metrics.isr_changes
        if shrinks:
            metrics.labels("shrink").inc(shrinks)
        if expands:
            metrics.labels("expand").inc(expands)
        topics = sorted({tp[0] for tp in changed})
        self.state_log.write(
            "isr",
            name="AlterPartition",
            target_broker=sender,
            topics=topics,
            partitions=len(changed),
            isr_shrinks=shrinks,
            isr_expands=expands,
        )
        log.info(
            "AlterPartition from broker %d: %d partition(s) of %d topic(s) changed "
            "(%d shrink(s), %d expansion(s))",
            sender, len(changed), len(topics), shrinks, expands,
        )  # fmt: skip


def _isr_of(version: int, p: ap.PartitionData) -> Sequence[int]:
    """The new ISR's broker ids (v3 names each with its broker epoch)."""
    if version >= 3:
        return [b.broker_id for b in p.new_isr_with_epochs]
    return p.new_isr


def _after(
    outcome: TopicOutcome, done: dict[TopicPartitionKey, PartitionRegistration], sender: int
) -> TopicOutcome:
    """Answers after reassignments completed: NEW_LEADER_ELECTED where the sender no longer
    leads (Kafka's answer when the ISR change completed a reassignment that moved the
    leadership), the new state elsewhere."""
    parts: list[PartitionOutcome] = []
    for index, error, st in outcome.partitions:
        new = done.get((outcome.name, index)) if error == 0 else None
        if new is not None:
            if new.leader != sender:
                parts.append((index, int(ErrorCode.NEW_LEADER_ELECTED), None))
                continue
            st = new
        parts.append((index, error, st))
    return outcome._replace(partitions=parts)


def response(
    request: ap.AlterPartitionRequest, error: int, outcomes: list[TopicOutcome]
) -> ap.AlterPartitionResponse:
    """The answer, at the request's version (topics by name up to v1, by id from v2)."""
    topics = []
    for o in outcomes:
        parts = tuple(
            ap.PartitionDataResponse(index, error_code)
            if st is None
            else ap.PartitionDataResponse(
                partition_index=index,
                error_code=error_code,
                leader_id=st.leader,
                leader_epoch=st.leader_epoch,
                isr=st.isr,
                leader_recovery_state=RECOVERED,
                partition_epoch=st.partition_epoch,
            )
            for index, error_code, st in o.partitions
        )
        topics.append(ap.TopicDataResponse(o.name, o.topic_id, parts))
    return ap.AlterPartitionResponse(version=request.version, error_code=error, topics=tuple(topics))

