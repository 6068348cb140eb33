"""DelayedProduce: an acks=-1 Produce waiting for its batches to be replicated (Kafka's
``DelayedProduce``).

After the leader appended, each partition waits until its high watermark covers the batch
(``Partition.checkEnoughReplicasReachOffset``): then it is answered NONE, or
NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below min.insync.replicas meanwhile; a
partition this broker no longer leads is answered NOT_LEADER_OR_FOLLOWER. The operation waits
in the replica manager's produce purgatory, watched under its partitions and checked again
whenever one of their high watermarks moves or their leadership changes; what has not been
replicated when the request's ``timeout_ms`` runs out is answered REQUEST_TIMED_OUT.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

from kmeta.protocol.errors import ErrorCode
from kmeta.server.replica.partition import Partition
from kmeta.server.replica.purgatory import DelayedOperation

Key = tuple[str, int]


class ProducePending(NamedTuple):
    """One appended partition of an acks=-1 Produce: the offset the high watermark must
    reach (its last offset + 1) and the topic's min.insync.replicas."""

    required_offset: int
    min_insync_replicas: int


#: what a completed produce is answered with: each waiting partition's error
ProduceCallback = Callable[[dict[Key, ErrorCode]], None]


class LeaderLookup(Protocol):
    """Where a delayed produce finds its partitions: the replica manager."""

    def leader_partition_or_error(self, topic: str, index: int) -> tuple[Partition | None, ErrorCode]: ...


def replication_error(rm: LeaderLookup, key: Key, pending: ProducePending) -> ErrorCode | None:
    """``Partition.checkEnoughReplicasReachOffset``: the partition's answer, or None while
    the high watermark is below the batch."""
    partition, _ = rm.leader_partition_or_error(*key)
    state = None if partition is None else partition.state
    if partition is None or state is None:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if partition.log.high_watermark < pending.required_offset:
        return None
    if len(partition.maximal_isr(state)) < pending.min_insync_replicas:
        return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return ErrorCode.NONE


class DelayedProduce(DelayedOperation):
    __slots__ = ("callback", "pending", "replica_manager", "results")

    def __init__(
        self, timeout_ms: int, pending: dict[Key, ProducePending], replica_manager: LeaderLookup,
        callback: ProduceCallback,
    ) -> None:  # fmt: skip
        super().__init__(max(timeout_ms, 0) / 1000.0)
        self.pending = pending
        self.replica_manager = replica_manager
        self.callback = callback
        self.results: dict[Key, ErrorCode] = {}

    def try_complete(self) -> bool:
        for key, pending in self.pending.items():
            if key in self.results:
                continue
            error = replication_error(self.replica_manager, key, pending)
            if error is not None:
                self.results[key] = error
        if len(self.results) == len(self.pending):
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        for key in self.pending:
            self.results.setdefault(key, ErrorCode.REQUEST_TIMED_OUT)
        self.callback(self.results)
