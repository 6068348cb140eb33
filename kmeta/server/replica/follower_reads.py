"""A follower's Fetch on the leader: who may fetch (Kafka's ``Partition.followerReplicaOrThrow``
and ``Replica.updateFetchStateOrThrow``), and the read of a partition whose log was never made.

The replica manager makes a partition's log when a request first needs it, so a broker holding
a million replica states does not hold a million logs (:mod:`kmeta.server.replica.partition`). A
follower fetches every partition it follows, most of them empty at the scale the metadata
benchmarks run, so a follower's fetch from offset 0 of a partition this broker leads but never
made a log for (nothing was produced to it, none recovered) is answered as the empty log it
would be — high watermark 0, no records — without making it. The first append makes it, and
the fetches waiting on it are woken then. A follower outside the ISR is read as usual (the log
made), so the leader tracks it and adds it back (:mod:`kmeta.server.replica.isr_manager`): a replica a
reassignment adds, or a broker that returns, must rejoin even an empty partition's ISR.
"""

from __future__ import annotations

from typing import Protocol

from kmeta.log.log_manager import LogManager
from kmeta.metadata.model import TopicPartitionKey
from kmeta.protocol.errors import ErrorCode
from kmeta.server.replica.delayed_fetch import FetchParams, FetchPartitionInfo, LogReadResult
from kmeta.server.replica.partition import leader_epoch_error
from kmeta.server.replica.remote_replica import RemoteReplica
from kmeta.server.replica.replica_states import LEADER, ReplicaState, ReplicaStates

#: what a follower reads of a partition whose log was never made: an empty log at 0
EMPTY_LOG = LogReadResult(ErrorCode.NONE, 0, 0, 0, b"")


def follower_error(
    broker_id: int, state: ReplicaState | None, remote: RemoteReplica | None, params: FetchParams,
    current_leader_epoch: int,
) -> ErrorCode:  # fmt: skip
    """A replica fetch from a broker that is not one of the partition's other replicas is
    refused: UNKNOWN_LEADER_EPOCH when it named an epoch (ours: it may be a replica being
    added that we do not know of yet), else NOT_LEADER_OR_FOLLOWER. A broker epoch older than
    the one that replica fetched with before (an earlier incarnation's fetcher) is
    NOT_LEADER_OR_FOLLOWER."""
    replica_id = params.replica_id
    if state is not None and replica_id != broker_id and replica_id in state.replicas:
        if remote is not None and remote.is_stale(params.replica_epoch):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE
    if current_leader_epoch != -1:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NOT_LEADER_OR_FOLLOWER


class MadeLogs(Protocol):
    """What :func:`unmade_read` asks of the replica manager: which logs are made."""

    @property
    def broker_id(self) -> int: ...
    @property
    def replicas(self) -> ReplicaStates: ...
    @property
    def log_manager(self) -> LogManager: ...
    def is_made(self, key: TopicPartitionKey) -> bool: ...


def unmade_read(rm: MadeLogs, params: FetchParams, part: FetchPartitionInfo) -> LogReadResult | None:
    """The answer to a follower's fetch of a partition led here whose log was never made,
    from offset 0 (checked as any replica fetch: epoch, role, replica); None when the
    partition's log exists or the fetch is not such a one (read it as usual)."""
    key = (part.topic, part.partition)
    if not params.is_from_follower or part.fetch_offset != 0 or rm.is_made(key):
        return None
    state = rm.replicas.get(key)
    if state is None or params.replica_id not in state.isr or rm.log_manager.get(*key) is not None:
        return None  # (a replica outside the ISR: made and tracked, so it can rejoin)
    error = leader_epoch_error(state.leader_epoch, part.current_leader_epoch)
    if error == ErrorCode.NONE and state.role != LEADER:
        error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    if error == ErrorCode.NONE:
        error = follower_error(rm.broker_id, state, None, params, part.current_leader_epoch)
    return EMPTY_LOG if error == ErrorCode.NONE else LogReadResult.failed(error)
