"""Partition: one partition replica this broker holds, as Kafka's ``kafka.cluster.Partition``.

Its role (leader or follower), leader epoch and ISR are what the last accepted LeaderAndIsr
set, kept in the broker's ``ReplicaStates`` (compact columns; read here on each use, so a
LeaderAndIsr changes a Partition without telling it); its records are a
:class:`kmeta.log.PartitionLog`. The :class:`~kmeta.server.replica_manager.ReplicaManager`
makes a Partition when a request first needs that replica's log, not at LeaderAndIsr: a broker
holding a million replica states (the scale benchmarks) would otherwise hold a million logs.

The high watermark has one rule, :meth:`Partition.maybe_increment_leader_hw`: no follower
replicates yet, so the leader's log end is the only one the ISR can vouch for; replication
(issue 29) swaps in Kafka's rule there (the minimum log end over the ISR).
"""

from __future__ import annotations

from collections.abc import Mapping

from kmeta.log.config import LogConfig
from kmeta.log.partition_log import PartitionLog
from kmeta.protocol.errors import ErrorCode
from kmeta.server.replica_states import LEADER, ReplicaState, ReplicaStates

NO_EPOCH = -1


class Partition:
    __slots__ = ("_configs", "_replicas", "broker_id", "index", "key", "log", "topic")

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
        """``Partition.checkCurrentLeaderEpoch``: a client's epoch (-1: none given) against
        ours: older FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH (our LeaderAndIsr is late)."""
        if requested == NO_EPOCH:
            return ErrorCode.NONE
        local = self.leader_epoch
        if local > requested:
            return ErrorCode.FENCED_LEADER_EPOCH
        if local < requested:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.NONE

    def check_local_log(self, current_leader_epoch: int, require_leader: bool) -> ErrorCode:
        """``Partition.getLocalLog``: the epoch first, then the role."""
        error = self.check_current_leader_epoch(current_leader_epoch)
        if error != ErrorCode.NONE:
            return error
        if require_leader and not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

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
        """Follow the role the last LeaderAndIsr gave (``Partition.makeLeader``): a leader
        records where its epoch starts (the log end now), so OffsetForLeaderEpoch answers
        before it appends anything, and its high watermark catches up with its log end (a
        recovered log is readable at once)."""
        state = self.state
        if state is None or state.role != LEADER:
            return
        self.log.maybe_assign_epoch_start_offset(state.leader_epoch, self.log.log_end_offset)
        self.maybe_increment_leader_hw(state)

    def maybe_increment_leader_hw(self, state: ReplicaState | None) -> bool:
        """The leader's high watermark after its log end moved; True if it moved.

        Kafka's rule is the smallest log end offset of the ISR. No follower fetches yet
        (replication is the next issue), so the only log end the leader knows is its own: the
        high watermark follows it, and acks=-1 is satisfied once the leader has appended."""
        if not self.is_leader:
            return False
        return self.log.update_high_watermark(self.log.log_end_offset)

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index})"
