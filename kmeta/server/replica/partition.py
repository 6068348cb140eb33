"""Partition: one partition replica this broker holds, as Kafka's ``kafka.cluster.Partition``.

Its role (leader or follower), leader epoch and ISR are what the last accepted LeaderAndIsr
set, kept in the broker's ``ReplicaStates`` (compact columns; read here on each use, so a
LeaderAndIsr changes a Partition without telling it); its records are a
:class:`kmeta.log.PartitionLog`. The :class:`~kmeta.server.replica.replica_manager.ReplicaManager`
makes a Partition when a request first needs that replica's log, not at LeaderAndIsr: a broker
holding a million replica states (the scale benchmarks) would otherwise hold a million logs.

As leader it keeps a :class:`~kmeta.server.replica.remote_replica.RemoteReplica` per follower,
updated by the follower's Fetch; the high watermark has one rule,
:meth:`Partition.maybe_increment_leader_hw`: the smallest log end offset over the ISR (the
maximal ISR while an AlterPartition is pending, as Kafka's), never moving back. An ISR of the
leader alone (RF 1) makes it the leader's log end, as before replication.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from kmeta.log.append_info import LogAppendInfo
from kmeta.log.config import LogConfig
from kmeta.log.errors import LogError
from kmeta.log.partition_log import PartitionLog
from kmeta.log.producer.producer_state import AbortedTxn
from kmeta.protocol.errors import ErrorCode
from kmeta.server.replica.remote_replica import RemoteReplica
from kmeta.server.replica.replica_states import LEADER, ReplicaState, ReplicaStates

NO_EPOCH = -1


def leader_epoch_error(local: int, requested: int) -> ErrorCode:
    """``Partition.checkCurrentLeaderEpoch``: a client's epoch (-1: none given) against
    ours: older FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH (our LeaderAndIsr is late)."""
    if requested == NO_EPOCH or local == requested:
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH if local > requested else ErrorCode.UNKNOWN_LEADER_EPOCH


class Partition:
    __slots__ = (
        "_configs",
        "_led_epoch",
        "_replicas",
        "broker_id",
        "epoch_start_offset",
        "index",
        "key",
        "log",
        "pending_isr",
        "remote",
        "topic",
    )

    def __init__(
        self, topic: str, index: int, broker_id: int, replicas: ReplicaStates, log: PartitionLog,
        configs: Mapping[str, str] | None,
    ) -> None:  # fmt: skip
        self.topic = topic
        self.index = index
        self.key = (topic, index)
        self.broker_id = broker_id
        self._replicas = replicas
        self.log = log
        #: the topic's config overrides the log's config was last built from
        self._configs = configs
        #: as leader: each follower's fetch state (Kafka's remoteReplicasMap)
        self.remote: dict[int, RemoteReplica] = {}
        #: the leader epoch ``remote`` was reset for (NO_EPOCH: not leading)
        self._led_epoch = NO_EPOCH
        #: as leader: where its leader epoch starts (a follower rejoins the ISR past it)
        self.epoch_start_offset = 0
        #: an ISR this leader asked the controller for (AlterPartition in flight), else None:
        #: Kafka's PendingExpandIsr / PendingShrinkIsr
        self.pending_isr: tuple[int, ...] | None = None

    @property
    def state(self) -> ReplicaState | None:
        """This broker's role for the partition (None: the replica was stopped)."""
        return self._replicas.get(self.key)

    @property
    def leader_epoch(self) -> int:
        state = self.state
        return NO_EPOCH if state is None else state.leader_epoch

    @property
    def is_leader(self) -> bool:
        state = self.state
        return state is not None and state.role == LEADER

    def check_current_leader_epoch(self, requested: int) -> ErrorCode:
        """:func:`leader_epoch_error` against this replica's epoch."""
        return leader_epoch_error(self.leader_epoch, requested)

    def check_local_log(self, current_leader_epoch: int, require_leader: bool) -> ErrorCode:
        """``Partition.getLocalLog``: the epoch first, then the role."""
        error = self.check_current_leader_epoch(current_leader_epoch)
        if error != ErrorCode.NONE:
            return error
        if require_leader and not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        return self.log.producer_state.aborted_transactions(fetch_offset, upper_bound)

    def write_txn_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool
    ) -> LogAppendInfo | tuple[ErrorCode, str | None]:
        """WriteTxnMarkers at this leader: the COMMIT/ABORT control batch appended
        (``PartitionLog.append_end_txn_marker``), or why not (NOT_LEADER_OR_FOLLOWER,
        INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, KAFKA_STORAGE_ERROR)."""
        state = self.state
        if state is None or state.role != LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        now = int(time.time() * 1000)
        try:
            return self.log.append_end_txn_marker(
                producer_id, producer_epoch, coordinator_epoch, commit, state.leader_epoch, now
            )
        except LogError as exc:
            return exc.error, str(exc) or None

    def refresh_config(self, configs: Mapping[str, str] | None) -> None:
        """The topic's overrides as the current snapshot holds them: a changed mapping (the
        snapshot shares an unchanged one) rebuilds the log's config."""
        if configs is self._configs:
            return
        self._configs = configs
        config = LogConfig.from_topic_configs(configs or {})
        if config != self.log.config:
            self.log.update_config(config)

    def make_leader_or_follower(self) -> None:
        """Follow the role the last LeaderAndIsr gave (``Partition.makeLeader``): a leader at
        a new epoch records where its epoch starts (the log end now), so OffsetForLeaderEpoch
        answers before it appends anything, and starts its followers' states afresh (an ISR
        member counts as caught up now); then its high watermark follows the ISR's log ends
        (RF 1: its own, so a recovered log is readable at once)."""
        state = self.state
        if state is None or state.role != LEADER:
            self._led_epoch = NO_EPOCH
            self.remote.clear()
            self.pending_isr = None
            return
        if state.leader_epoch != self._led_epoch:
            self._led_epoch = state.leader_epoch
            self.pending_isr = None
            end = self.epoch_start_offset = self.log.log_end_offset
            self.log.maybe_assign_epoch_start_offset(state.leader_epoch, end)
            now = int(time.time() * 1000)
            self.remote.clear()
            for replica in state.replicas:
                if replica != self.broker_id:
                    remote = self.remote[replica] = RemoteReplica(replica)
                    remote.reset(now, end, replica in state.isr)
        else:
            for replica in state.replicas:  # (a reassignment added one)
                if replica != self.broker_id and replica not in self.remote:
                    self.remote[replica] = RemoteReplica(replica)
            if self.pending_isr is not None and tuple(state.isr) == self.pending_isr:
                self.pending_isr = None  # (the LeaderAndIsr carries what we asked for)
        self.maybe_increment_leader_hw(state)

    def maximal_isr(self, state: ReplicaState) -> tuple[int, ...]:
        """The committed ISR with what a pending expansion adds (Kafka's maximalIsr): the
        high watermark waits for a replica being added before the controller says so."""
        if self.pending_isr is None:
            return state.isr
        return tuple(dict.fromkeys((*state.isr, *self.pending_isr)))

    def maybe_increment_leader_hw(self, state: ReplicaState | None) -> bool:
        """``Partition.maybeIncrementLeaderHW``: the smallest log end offset over the
        (maximal) ISR, the leader's own included; it only moves forward, and a follower whose
        log end is not known yet (it has not fetched since this broker became leader) holds
        it where it is. True if it moved."""
        if state is None or state.role != LEADER:
            return False
        new_hw = self.log.log_end_offset
        for replica in self.maximal_isr(state):
            if replica == self.broker_id:
                continue
            remote = self.remote.get(replica)
            if remote is None or remote.log_end_offset < new_hw:
                new_hw = -1 if remote is None else remote.log_end_offset
        if new_hw <= self.log.high_watermark:
            return False
        return self.log.update_high_watermark(new_hw)

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, broker_epoch: int) -> bool:
        """A follower's Fetch at ``fetch_offset`` (``Partition.updateFollowerFetchState``):
        its log end and caught-up time; True if the high watermark moved."""
        state = self.state
        remote = self.remote.get(replica_id)
        if state is None or state.role != LEADER or remote is None:
            return False
        now = int(time.time() * 1000)
        remote.update_fetch_state(fetch_offset, now, self.log.log_end_offset, broker_epoch)
        return self.maybe_increment_leader_hw(state)

    def out_of_sync_replicas(self, state: ReplicaState, now_ms: int, max_lag_ms: int) -> list[int]:
        """``Partition.getOutOfSyncReplicas``: the followers in the ISR that are neither at
        the leader's log end nor were caught up within ``max_lag_ms``."""
        end = self.log.log_end_offset
        out = []
        for replica in state.isr:
            remote = self.remote.get(replica)
            if replica == self.broker_id or remote is None:
                continue
            if remote.log_end_offset != end and now_ms - remote.last_caught_up_time_ms > max_lag_ms:
                out.append(replica)
        return out

    def may_join_isr(self, state: ReplicaState, replica_id: int) -> bool:
        """``Partition.isFollowerInSync``: a replica outside the ISR whose log end reached
        the high watermark and the start of this leader's epoch."""
        remote = self.remote.get(replica_id)
        if remote is None or replica_id in state.isr or replica_id not in state.replicas:
            return False
        end = remote.log_end_offset
        return end >= self.log.high_watermark and end >= self.epoch_start_offset

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index})"
