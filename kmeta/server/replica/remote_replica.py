"""RemoteReplica: what a partition's leader knows of one follower (Kafka's ``kafka.cluster.Replica``).

Updated by each Fetch the follower sends (:meth:`RemoteReplica.update_fetch_state`, Kafka's
``Replica.updateFetchStateOrThrow``): the fetch offset is the follower's log end offset, and
the follower was caught up at the time of this fetch when it asked for everything the leader
had, or at the time of its previous fetch when it now asks from the log end the leader had
then. ``last_caught_up_time_ms`` is what replica.lag.time.max.ms is measured from
(:meth:`kmeta.server.replica.partition.Partition.maybe_shrink_isr`).
"""

from __future__ import annotations

#: a log end offset not known (the follower has not fetched since this broker became leader)
UNKNOWN_OFFSET = -1


class RemoteReplica:
    __slots__ = (
        "broker_epoch",
        "broker_id",
        "last_caught_up_time_ms",
        "last_fetch_leader_log_end_offset",
        "last_fetch_time_ms",
        "log_end_offset",
    )

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.log_end_offset = UNKNOWN_OFFSET
        self.last_caught_up_time_ms = 0
        self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
        self.last_fetch_time_ms = 0
        self.broker_epoch = -1

    def reset(self, now_ms: int, leader_log_end_offset: int, in_sync: bool) -> None:
        """``Replica.resetReplicaState`` when this broker becomes leader: the follower's log
        end is unknown until it fetches; an ISR member counts as caught up now (it has the
        lag time to fetch before it may be dropped)."""
        self.log_end_offset = UNKNOWN_OFFSET
        self.last_caught_up_time_ms = now_ms if in_sync else 0
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_time_ms = now_ms if in_sync else 0

    def is_stale(self, broker_epoch: int) -> bool:
        """A fetch naming a broker epoch older than one this follower fetched with before
        (Fetch v15+ ReplicaState, KIP-903): a fetcher of an earlier incarnation, fenced with
        NOT_LEADER_OR_FOLLOWER as Kafka's ``Replica.updateFetchStateOrThrow``."""
        return broker_epoch != -1 and broker_epoch < self.broker_epoch

    def update_fetch_state(
        self, fetch_offset: int, fetch_time_ms: int, leader_log_end_offset: int, broker_epoch: int
    ) -> None:
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_time_ms = fetch_time_ms
        if broker_epoch != -1:
            self.broker_epoch = broker_epoch

    def __repr__(self) -> str:
        return (
            f"RemoteReplica({self.broker_id}, leo={self.log_end_offset}, "
            f"caught_up={self.last_caught_up_time_ms})"
        )
