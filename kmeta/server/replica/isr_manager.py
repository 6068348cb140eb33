"""IsrManager: the leader's ISR changes (Kafka's ``Partition.maybeShrinkIsr`` /
``maybeExpandIsr``, the isr-expiration task and ``AlterPartitionManager``).

* Every half of replica.lag.time.max.ms, each partition this broker leads drops the followers
  in its ISR that are neither at its log end nor were caught up within the lag time.
* A follower's fetch that brings it to the high watermark (and past the start of this
  leader's epoch) adds it back.

Either change is an AlterPartition (API 56) to the controller, sent over the controller
link's forwarding connection (the cluster's identity; a NOT_CONTROLLER answer goes on to the
next controller). Until the controller answers, the proposed ISR is pending (Kafka's
PendingShrinkIsr / PendingExpandIsr: one in flight per partition; the high watermark counts
a replica being added, and still the one being dropped). The ISR changes here only when the
controller's answer (or the LeaderAndIsr that follows it) says so; an error clears the
pending change and the next check proposes again. Without a controller nothing is proposed.

Each outcome goes to the broker's state-change log (when it has one) as Kafka's Partition logs
"ISR updated to ..." / "Failed to alter partition": an ``isr_change`` line per topic and
change, naming its partitions, what was asked (``name`` Shrink or Expand), the ISR before and
after (the one asked for when refused), the epochs, the error (REQUEST_TIMED_OUT when the
controller never answered) and how long the AlterPartition took. ``kmeta pipeline analyze``
summarises them.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from kmeta.metadata.cache import MetadataCache
from kmeta.net.state_change_log import StateChangeLog
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode, UnsupportedVersionError
from kmeta.protocol.messages import alter_partition as ap
from kmeta.protocol.registry import highest_common
from kmeta.server.replica.partition import Partition
from kmeta.server.replica.purgatory import DelayedOperationPurgatory
from kmeta.server.replica.replica_states import LEADER, ReplicaStates
from kmeta.server.to_controller.controller_connection import NET_ERRORS
from kmeta.server.to_controller.forwarding import ForwardingManager, ForwardTimedOut

log = logging.getLogger("kmeta.server.isr")

Key = tuple[str, int]
#: how long an AlterPartition may wait for the controller's answer
ALTER_PARTITION_TIMEOUT_S = 10.0
#: after the controller could not be asked (not reachable, does not serve AlterPartition),
#: nothing is proposed for this long
RETRY_BACKOFF_S = 5.0


class Proposal(NamedTuple):
    partition: Partition
    new_isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int
    #: the ISR it changes, and when it was proposed (monotonic s), for the state-change log
    isr: tuple[int, ...]
    proposed_s: float


class IsrHost(Protocol):
    """What the ISR manager reads and wakes of the replica manager that holds it."""

    @property
    def broker_id(self) -> int: ...
    @property
    def cache(self) -> MetadataCache: ...
    @property
    def replicas(self) -> ReplicaStates: ...
    @property
    def delayed_produce(self) -> DelayedOperationPurgatory: ...
    def broker_epoch_of(self) -> int: ...
    def led_partitions(self) -> list[Partition]: ...
    def high_watermark_moved(self, partition: Partition) -> None: ...


class IsrManager:
    def __init__(self, rm: IsrHost, max_lag_ms: int) -> None:
        self.rm = rm
        self.max_lag_ms = max_lag_ms
        #: the controller link's forwarding (the broker state sets this; None: no controller)
        self.channel: Callable[[], ForwardingManager | None] = lambda: None
        self._queued: dict[Key, Proposal] = {}
        self._flushing = False
        self._timer: asyncio.TimerHandle | None = None
        self._quiet_until = 0.0
        self._tasks: set[asyncio.Task[None]] = set()
        #: ISR changes the controller accepted (Kafka's IsrShrinksPerSec / IsrExpandsPerSec)
        self.shrinks = 0
        self.expands = 0
        #: the broker's state-change log (the broker state sets it; None: not written), and
        #: the outcomes of the answer being applied: (topic, change, epochs, error) ->
        #: (partition indexes, the oldest proposal's time)
        self.state_log: StateChangeLog | None = None
        self._outcomes: dict[tuple[str, str, tuple[int, ...], tuple[int, ...], int, int, int], tuple[list[int], float]] = {}

    def start(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # (built outside a loop, as in-memory tests do: no timer)
            return
        self._timer = loop.call_later(self.max_lag_ms / 2000.0, self._tick)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in self._tasks:
            task.cancel()

    def _tick(self) -> None:
        try:
            now = int(time.time() * 1000)
            for partition in self.rm.led_partitions():
                self.maybe_shrink(partition, now)
        finally:
            self.start()

    # -- proposals ---------------------------------------------------------------------------
    def maybe_shrink(self, partition: Partition, now_ms: int) -> None:
        state = partition.state
        if state is None or state.role != LEADER or partition.pending_isr is not None:
            return
        out = partition.out_of_sync_replicas(state, now_ms, self.max_lag_ms)
        if out:
            new_isr = tuple(r for r in state.isr if r not in out)
            log.info("%s: shrinking the ISR %s -> %s (out of sync: %s)", partition, list(state.isr), list(new_isr), out)
            self._propose(partition, new_isr)

    def maybe_expand(self, partition: Partition, replica_id: int) -> None:
        state = partition.state
        if state is None or state.role != LEADER or partition.pending_isr is not None:
            return
        if partition.may_join_isr(state, replica_id):
            new_isr = (*state.isr, replica_id)
            log.info("%s: expanding the ISR %s -> %s", partition, list(state.isr), list(new_isr))
            self._propose(partition, new_isr)

    def _propose(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        state = partition.state
        if state is None or self.channel() is None or time.monotonic() < self._quiet_until:
            return
        partition.pending_isr = new_isr
        self._queued[partition.key] = Proposal(
            partition, new_isr, state.leader_epoch, state.partition_epoch, tuple(state.isr), time.monotonic()
        )
        if not self._flushing:  # (every proposal of this loop turn in one request)
            self._flushing = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flushing = False
        batch, self._queued = self._queued, {}
        if batch:
            task = asyncio.get_running_loop().create_task(self._send(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    # -- the request and its answer --------------------------------------------------------------
    def _request(self, batch: dict[Key, Proposal], version: int) -> ap.AlterPartitionRequest:
        snap = self.rm.cache.snapshot
        by_topic: dict[str, list[ap.PartitionData]] = {}
        for (topic, index), p in batch.items():
            epochs = tuple(ap.BrokerState(r, self._broker_epoch(p.partition, r)) for r in p.new_isr)
            by_topic.setdefault(topic, []).append(ap.PartitionData(
                partition_index=index, leader_epoch=p.leader_epoch,
                new_isr=p.new_isr if version < 3 else (),
                new_isr_with_epochs=epochs if version >= 3 else (),
                leader_recovery_state=0, partition_epoch=p.partition_epoch,
            ))  # fmt: skip
        return ap.AlterPartitionRequest(
            version=version, broker_id=self.rm.broker_id, broker_epoch=self.rm.broker_epoch_of(),
            topics=tuple(
                ap.TopicData(topic_name=t, topic_id=snap.topic_id(t) or uuid.UUID(int=0), partitions=tuple(ps))
                for t, ps in by_topic.items()
            ),
        )  # fmt: skip

    def _broker_epoch(self, partition: Partition, replica: int) -> int:
        if replica == self.rm.broker_id:
            return self.rm.broker_epoch_of()
        remote = partition.remote.get(replica)
        return -1 if remote is None else remote.broker_epoch

    async def _send(self, batch: dict[Key, Proposal]) -> None:
        channel = self.channel()
        version = 3
        if channel is not None and channel.admin_versions:
            version = highest_common(channel.admin_versions, ApiKey.ALTER_PARTITION, range(4)) or -1
        try:
            if channel is None or version < 0:
                raise UnsupportedVersionError("the controller does not serve AlterPartition")
            response = await channel.forward(self._request(batch, version), ALTER_PARTITION_TIMEOUT_S)
        except (ForwardTimedOut, UnsupportedVersionError, *NET_ERRORS) as exc:
            log.warning("AlterPartition for %d partitions not answered: %r", len(batch), exc)
            self._quiet_until = time.monotonic() + RETRY_BACKOFF_S
            unanswered = (
                ErrorCode.UNSUPPORTED_VERSION
                if isinstance(exc, UnsupportedVersionError)
                else ErrorCode.REQUEST_TIMED_OUT
            )
            self._clear(batch, unanswered)
            return
        if response.error_code != ErrorCode.NONE:
            log.warning("AlterPartition refused: %s", ErrorCode(response.error_code).name)
            self._clear(batch, ErrorCode(response.error_code))
            return
        names = {i: n for n, i in self.rm.cache.snapshot.topic_ids.items()}
        answered: set[Key] = set()
        for t in response.topics:
            topic = t.topic_name if version < 2 else names.get(t.topic_id, "")
            for p in t.partitions:
                key = (topic, p.partition_index)
                proposal = batch.get(key)
                if proposal is not None:
                    answered.add(key)
                    self._apply(proposal, p)
        self._clear({k: v for k, v in batch.items() if k not in answered}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def _clear(self, batch: dict[Key, Proposal], error: ErrorCode) -> None:
        """Proposals that got no answer of their own (``error`` says why): pending no more."""
        for p in batch.values():
            if p.partition.pending_isr == p.new_isr:
                p.partition.pending_isr = None
            self._log(p, p.new_isr, p.partition_epoch, error)
        self._flush_log()

    def _log(self, proposal: Proposal, isr: Sequence[int], partition_epoch: int, error: int) -> None:
        """Note one proposal's outcome (``isr`` as committed, or as asked) for the state-change
        log: :meth:`_flush_log` writes the outcomes of one answer grouped by topic and change."""
        if self.state_log is None:
            return
        p = proposal.partition
        name = "Shrink" if len(proposal.new_isr) < len(proposal.isr) else "Expand"
        key = (p.topic, name, proposal.isr, tuple(isr), proposal.leader_epoch, partition_epoch, int(error))
        indexes, oldest = self._outcomes.get(key, ([], proposal.proposed_s))
        indexes.append(p.index)
        self._outcomes[key] = (indexes, min(oldest, proposal.proposed_s))

    def _flush_log(self) -> None:
        """One ``isr_change`` line per topic and change: a burst of 5,000 shrinks of one ISR
        over 50 topics is 50 lines, not 5,000 (23 µs a line on a loaded box: the broker's loop
        would be held ~0.1 s writing them)."""
        outcomes, self._outcomes = self._outcomes, {}
        if self.state_log is None or not outcomes:
            return
        now = time.monotonic()
        for (topic, name, before, after, leader_epoch, partition_epoch, error), (indexes, since) in outcomes.items():
            self.state_log.write(
                "isr_change", name=name, topic=topic, partition_indexes=sorted(indexes),
                isr=list(before), new_isr=list(after), leader_epoch=leader_epoch,
                partition_epoch=partition_epoch, error_code=error,
                alter_ms=round((now - since) * 1000.0, 3),
            )  # fmt: skip
        self.state_log.flush()

    def _apply(self, proposal: Proposal, answer: ap.PartitionDataResponse) -> None:
        """``Partition.handleAlterPartitionUpdate``: the committed ISR becomes ours when it
        is newer than what we hold; an error leaves ours (the LeaderAndIsr that follows the
        change someone else made brings the news)."""
        partition = proposal.partition
        if answer.error_code != ErrorCode.NONE:
            self._log(proposal, proposal.new_isr, proposal.partition_epoch, answer.error_code)
        elif answer.partition_epoch > proposal.partition_epoch:  # (committed, whatever we hold)
            self._log(proposal, answer.isr, answer.partition_epoch, ErrorCode.NONE)
        if partition.pending_isr != proposal.new_isr:
            return  # (a LeaderAndIsr came meanwhile)
        partition.pending_isr = None
        state = partition.state
        if answer.error_code != ErrorCode.NONE:
            log.info("%s: AlterPartition to %s: %s", partition, list(proposal.new_isr), ErrorCode(answer.error_code).name)
            return
        if state is None or state.role != LEADER or answer.leader_epoch != state.leader_epoch:
            return
        if answer.partition_epoch <= state.partition_epoch:
            return
        before = state.isr
        self.rm.replicas[partition.key] = state._replace(isr=tuple(answer.isr), partition_epoch=answer.partition_epoch)
        if len(answer.isr) < len(before):
            self.shrinks += 1
        elif len(answer.isr) > len(before):
            self.expands += 1
        log.info("%s: ISR %s -> %s (partition epoch %d)", partition, list(before), list(answer.isr), answer.partition_epoch)
        if partition.maybe_increment_leader_hw(partition.state):
            self.rm.high_watermark_moved(partition)
        else:  # (a shrink below min.insync.replicas: waiting produces answer now)
            self.rm.delayed_produce.check_and_complete(partition.key)
